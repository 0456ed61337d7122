"""The NER baselines without pretraining (model/ner_baselines.py): window features from the training
split only, products equal to the dense matrix's, a per-character logistic regression that learns
entities signalled by their context (and not from shuffled tags), chosen on dev by entity F1,
deterministic."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch

from model.ner_baselines import (
    TEMPLATES,
    NerBaselineConfig,
    WindowVocabulary,
    char_class,
    ner_baselines,
    split_tags,
    tag_ids,
)
from model.ner_data import NerExample, entity_spans
from model.ner_windows import WindowSum

FILLER = "的了是在有和我他这那就也都要说会上下"
NAME_CHARS = "甲乙丙丁戊己庚辛壬癸子丑寅卯辰巳午未申酉"  # the same characters for every type
CUES = {"去": "LOC", "叫": "PER", "加入": "ORG"}  # the word before an entity says its type


def _example(rng: random.Random, number: int) -> NerExample:
    """12 filler characters with one or two entities of 2 characters, each right after its cue, at a
    random place."""
    chars = [rng.choice(FILLER) for _ in range(12)]
    tags = ["O"] * 12
    for slot in rng.sample([0, 6], rng.choice([1, 2])):  # anywhere in its half of the example
        cue, kind = rng.choice(sorted(CUES.items()))
        name = [rng.choice(NAME_CHARS) for _ in range(2)]
        span = list(cue) + name
        start = slot + rng.randrange(6 - len(span) + 1)
        chars[start : start + len(span)] = span
        tags[start : start + len(span)] = ["O"] * len(cue) + [f"B-{kind}", f"I-{kind}"]
    return NerExample(f"synthetic/{number}", chars, tags)


def _task(seed: int = 0, sizes=(300, 80, 80)) -> dict[str, list[NerExample]]:
    rng = random.Random(seed)
    examples = [_example(rng, i) for i in range(sum(sizes))]
    train, dev = sizes[0], sizes[0] + sizes[1]
    return {"train": examples[:train], "dev": examples[train:dev], "test": examples[dev:]}


def _f1(examples: list[NerExample], predicted: list[list[str]]) -> float:
    gold = {(i, *s) for i, e in enumerate(examples) for s in entity_spans(e.tags)}
    found = {(i, *s) for i, tags in enumerate(predicted) for s in entity_spans(tags)}
    return 2 * len(gold & found) / (len(gold) + len(found))


CONFIG = NerBaselineConfig(
    ner_min_count=1,
    ner_linear_l2=(1e-2, 1e-4),
    ner_linear_max_iter=100,
    ner_crf_l2=(1e-3, 1e-4),
    ner_crf_max_iter=50,
)


def test_features_come_from_train_and_unseen_values_share_the_rare_column():
    train = [NerExample("a", list("北京大学"), ["B-ORG", "I-ORG", "I-ORG", "I-ORG"])]
    vocabulary = WindowVocabulary.fit(train, min_count=1)
    features = vocabulary.features([NerExample("b", list("北京大雪"), ["O"] * 4)])
    assert features.ids.shape == (4, len(TEMPLATES)) and features.shape[1] == vocabulary.size
    seen = vocabulary.features(train).ids
    # 北 and 京 have the same windows as in training up to offset +1; 雪 is unseen: the rare column
    assert np.array_equal(features.ids[0, :4], seen[0, :4])
    rare = [vocabulary.offsets[k + 1] - 1 for k in range(len(TEMPLATES))]
    assert features.ids[3, 2] == rare[2] and features.ids[3, 2] != seen[3, 2]
    # each template's columns are its own: ids fall in [offsets[k], offsets[k + 1])
    assert all(
        vocabulary.offsets[k] <= i < vocabulary.offsets[k + 1] for row in seen for k, i in enumerate(row)
    )
    assert [char_class(c) for c in "1１aＡ，。中"] == [1, 1, 2, 2, 3, 3, 4]


def test_window_sums_and_their_gradient_equal_the_dense_matrix_products():
    task = _task(sizes=(20, 0, 0))
    vocabulary = WindowVocabulary.fit(task["train"], min_count=1)
    features = vocabulary.features(task["train"])
    dense = torch.zeros(features.shape, dtype=torch.float64)
    for row, ids in enumerate(features.ids):
        dense[row, ids] += 1
    torch.manual_seed(0)
    table = torch.randn(features.shape[1], 7, requires_grad=True)
    upstream = torch.randn(features.shape[0], 7)
    scores = WindowSum.apply(table, features)
    torch.testing.assert_close(scores.double(), dense @ table.detach().double(), atol=1e-5, rtol=1e-5)
    scores.backward(upstream)
    torch.testing.assert_close(table.grad.double(), dense.T @ upstream.double(), atol=1e-5, rtol=1e-5)


def test_tag_ids_round_trip_per_example():
    task = _task(sizes=(5, 0, 0))
    assert split_tags(tag_ids(task["train"]), task["train"]) == [e.tags for e in task["train"]]


def test_baselines_learn_entities_from_their_context():
    task = _task()
    logs = []
    results = ner_baselines(task, CONFIG, log=logs.append)
    assert [r.name for r in results] == ["char_ngram_linear", "char_ngram_crf"]
    for result, grid in zip(results, (CONFIG.ner_linear_l2, CONFIG.ner_crf_l2)):
        assert set(result.predictions) == {"train", "dev", "test"}
        for split, examples in task.items():
            assert [len(tags) for tags in result.predictions[split]] == [len(e.chars) for e in examples]
        starts = len(result.dev_f1) // 2  # the CRF: the grid from each start (1 or 2), chosen on dev
        assert len(result.dev_f1) in (2, 4) and result.chosen["l2"] in grid
        assert max(result.dev_f1) > 0.95
        assert _f1(task["test"], result.predictions["test"]) > 0.95
        summary = result.summary()
        assert [g["l2"] for g in summary["grid"]] == list(grid) * starts
        assert summary["chosen"] == result.chosen and json.loads(json.dumps(summary)) == summary
    assert len(logs) == 3
    # the CRF learned the chain: no I- after O or after another type anywhere
    for tags in results[1].predictions["test"]:
        for previous, tag in zip(["O", *tags], tags):
            assert not tag.startswith("I-") or previous[2:] == tag[2:], tags


def test_shuffled_tags_teach_nothing():
    """The control: the same characters with another example's tags (all examples have 12 characters)
    leave nothing to learn, so the test F1 falls near chance."""
    task = _task()
    rng = random.Random(1)
    shuffled = [e.tags for e in task["train"]]
    rng.shuffle(shuffled)
    task["train"] = [NerExample(e.id, e.chars, tags) for e, tags in zip(task["train"], shuffled)]
    for result in ner_baselines(task, CONFIG, log=lambda _: None):
        assert _f1(task["test"], result.predictions["test"]) < 0.3, result.name


def test_baselines_are_deterministic():
    task = _task(sizes=(100, 30, 30))
    first, second = (ner_baselines(task, CONFIG, log=lambda _: None) for _ in range(2))
    for one, other in zip(first, second):
        assert one.predictions == other.predictions and one.dev_f1 == other.dev_f1


@pytest.mark.parametrize("text", ["1e-6,1e-7", "1e-5"])
def test_config_grid_parses_from_the_command_line(text):
    import argparse

    from core.config_cli import add_arguments, from_args

    parser = argparse.ArgumentParser()
    add_arguments(parser, NerBaselineConfig)
    cfg = from_args(NerBaselineConfig, parser.parse_args(["--ner-linear-l2", text]))
    assert cfg.ner_linear_l2 == tuple(float(x) for x in text.split(","))


def test_an_empty_split_and_an_empty_example_get_empty_tags():
    task = _task(sizes=(50, 10, 0))
    task["dev"].append(NerExample("empty", [], []))
    for result in ner_baselines(task, CONFIG, log=lambda _: None):
        assert result.predictions["test"] == [] and result.predictions["dev"][-1] == []

"""promotion.samples.DownstreamSample with k fine-tuning seeds and a metric (accuracy or entity F1):
construction, validation, JSON version 2 and version 1; promotion.downstream: one or several tasks'
results as the promotion reads them."""

from __future__ import annotations

import json

import numpy as np
import pytest

from core.errors import UserError
from promotion.downstream import downstream_baselines, downstream_pairs, with_downstream
from promotion.samples import DownstreamSample

COUNTS = ("true_positives", "false_positives", "false_negatives")


def ner_scores(rng, n: int) -> dict:
    return {name: rng.integers(0, 4, n) for name in COUNTS}


def test_from_scores_builds_the_seed_tables_and_their_values():
    rng = np.random.default_rng(0)
    scores = [{"correct": rng.random(20) < 0.7} for _ in range(3)]
    sample = DownstreamSample.from_scores("reviews", "accuracy", [3, 1, 2], scores)
    assert (sample.k, sample.n, sample.seeds, sample.metric) == (3, 20, [3, 1, 2], "accuracy")
    assert sample.correct.shape == (3, 20) and sample.correct.dtype == bool
    assert sample.per_seed == [float(s["correct"].mean()) for s in scores]
    assert sample.value == pytest.approx(np.mean(sample.per_seed))

    ner = DownstreamSample.from_scores(
        "peoples-daily-ner", "entity_f1", [0, 1], [ner_scores(rng, 30) for _ in range(2)]
    )
    assert ner.true_positives.shape == (2, 30) and ner.correct is None
    tp, fp, fn = (ner.tables[name].sum() for name in COUNTS)
    assert ner.value == pytest.approx(2 * tp / (2 * tp + fp + fn))
    tp0, fp0, fn0 = (ner.tables[name][0].sum() for name in COUNTS)
    assert ner.per_seed[0] == pytest.approx(2 * tp0 / (2 * tp0 + fp0 + fn0))


def test_json_version_2_round_trips_both_metrics():
    rng = np.random.default_rng(1)
    sample = DownstreamSample("reviews", rng.random((3, 25)) < 0.5, seeds=[0, 1, 2])
    data = json.loads(json.dumps(sample.to_json()))
    assert data["version"] == 2 and data["k"] == 3 and data["n"] == 25 and data["metric"] == "accuracy"
    assert len(data["correct"]) == 3 and all(
        isinstance(row, str) and len(row) == 25 for row in data["correct"]
    )
    assert DownstreamSample.from_json(data) == sample
    assert DownstreamSample.from_json(json.dumps(data)) == sample

    ner = DownstreamSample.from_scores("ner", "entity_f1", [7], [ner_scores(rng, 12)])
    data = json.loads(json.dumps(ner.to_json()))
    assert data["seeds"] == [7] and all(isinstance(x, int) for x in data["true_positives"][0])
    assert "correct" not in data
    assert DownstreamSample.from_json(data) == ner


def test_version_1_json_still_loads_as_one_seed_of_accuracy():
    old = {"kind": "albert-downstream-sample", "version": 1, "task": "reviews", "n": 4, "correct": "1101"}
    sample = DownstreamSample.from_json(old)
    assert (sample.k, sample.n, sample.seeds, sample.metric) == (1, 4, [0], "accuracy")
    assert sample.correct.tolist() == [[True, True, False, True]] and sample.value == 0.75
    with pytest.raises(UserError, match="JSON version 3 \\(this code reads 1, 2\\)"):
        DownstreamSample.from_json({**old, "version": 3})


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            dict(correct=np.zeros((2, 2, 2))),
            "expected one row per seed (seeds x examples), got shape (2, 2, 2)",
        ),
        (dict(correct=[[1, 0], [1]]), "the seeds' rows have different lengths [2, 1]"),
        (dict(correct=["01", "1"]), "the seeds' rows have different lengths [2, 1]"),
        (dict(correct=[[1, 0], [1, 1]], seeds=[0]), "1 seeds for 2 rows of results"),
        (dict(correct=[[1, 0], [1, 1]], seeds=[4, 4]), "duplicate seeds [4, 4]"),
        (dict(correct=[[1, 0]], seeds=["a"]), "seeds must be integers"),
        (dict(correct=[[1, 0]], metric="bleu"), "unknown metric 'bleu'; known: ['accuracy', 'entity_f1']"),
        (dict(metric="entity_f1", correct=[1]), "metric entity_f1 needs 'true_positives'"),
        (
            dict(correct=[1], true_positives=[1]),
            "'true_positives' does not belong to metric accuracy",
        ),
        (
            dict(metric="entity_f1", true_positives=[1, -1], false_positives=[0, 0], false_negatives=[0, 0]),
            "true_positives: expected whole numbers >= 0",
        ),
        (
            dict(metric="entity_f1", true_positives=[1.5], false_positives=[0], false_negatives=[0]),
            "true_positives: expected whole numbers >= 0",
        ),
        (
            dict(metric="entity_f1", true_positives=[1, 1], false_positives=[0], false_negatives=[0, 0]),
            "tables of different shapes",
        ),
        (dict(correct=np.zeros((0, 3))), "no seed"),
    ],
)
def test_validation_errors_are_one_line(kwargs, message):
    with pytest.raises(UserError) as err:
        DownstreamSample("reviews", **kwargs)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_from_scores_errors():
    with pytest.raises(UserError, match="lack \\['false_negatives'\\]"):
        DownstreamSample.from_scores(
            "ner", "entity_f1", [0], [{"true_positives": [1], "false_positives": [0]}]
        )
    with pytest.raises(UserError, match="different lengths"):
        DownstreamSample.from_scores("r", "accuracy", [0, 1], [{"correct": [1, 0]}, {"correct": [1]}])
    with pytest.raises(UserError, match="unknown metric"):
        DownstreamSample.from_scores("r", "f1", [0], [{"correct": [1]}])


# ------------------------------------------------------------------------------ promotion.downstream


def result(task: str, metric: str, cand, prod) -> dict:
    return {
        "task": task,
        "metric": metric,
        "candidate": cand.value,
        "production": prod.value if prod else None,
        "candidate_sample": cand.to_json(),
        "production_sample": prod.to_json() if prod else None,
    }


def test_one_result_or_a_list_of_results_reach_the_gate_and_the_metrics():
    rng = np.random.default_rng(2)
    acc = [DownstreamSample("reviews", rng.random((3, 10)) < 0.5) for _ in range(2)]
    ner = [
        DownstreamSample.from_scores("ner", "entity_f1", [0, 1, 2], [ner_scores(rng, 8) for _ in range(3)])
        for _ in range(2)
    ]
    one = result("reviews", "accuracy", *acc)
    assert downstream_pairs(one) == [tuple(acc)]
    assert downstream_pairs([one, result("ner", "entity_f1", ner[0], None)]) == [tuple(acc), (ner[0], None)]
    assert downstream_pairs(None) == [] and downstream_pairs([]) == []

    cand, prod = {"mlm_loss": 2.0}, {"mlm_loss": 2.1}
    # one accuracy task keeps today's key
    assert with_downstream(cand, prod, [one]) == (
        {"mlm_loss": 2.0, "downstream_accuracy": acc[0].value},
        {"mlm_loss": 2.1, "downstream_accuracy": acc[1].value},
    )
    # several tasks: one key per task and metric; a task without production leaves production's out
    both = with_downstream(cand, prod, [one, result("ner", "entity_f1", ner[0], None)])
    assert both == (
        {
            "mlm_loss": 2.0,
            "downstream_accuracy:reviews": acc[0].value,
            "downstream_entity_f1:ner": ner[0].value,
        },
        {"mlm_loss": 2.1, "downstream_accuracy:reviews": acc[1].value},
    )
    # one NER task alone is named by its metric and task too
    alone = with_downstream(cand, None, result("ner", "entity_f1", *ner))
    assert alone == ({"mlm_loss": 2.0, "downstream_entity_f1:ner": ner[0].value}, None)
    assert cand == {"mlm_loss": 2.0}
    # the decision's table shows each task's baselines under the same key as its values
    with_baselines = [
        {**one, "baselines": {"char_ngram_logreg": 0.8}},
        result("ner", "entity_f1", ner[0], None),
    ]
    assert downstream_baselines(with_baselines) == {
        "downstream_accuracy:reviews": {"char_ngram_logreg": 0.8},
        "downstream_entity_f1:ner": {},
    }
    assert downstream_baselines(None) == {}

"""promotion.degenerate: a model that predicts one thing is named as one. A constant SOP head is told
from the eval sample and the majority baseline alone, named in the gate's warnings and checks (not a
veto); an NER model that finds no entity and a classifier right on one class only are named from the
fine-tuning report."""

from __future__ import annotations

import numpy as np
import pytest

from promotion.degenerate import downstream_degenerate, sop_constant
from promotion.gate import Baselines, EvalSample, GateConfig, decide
from promotion.gate_report import decision_table_markdown
from promotion.samples import DownstreamSample
from tests.promotion.test_gate import first_world

CONSTANT = "the SOP head predicts one label for every sequence"


def with_sop(sample: EvalSample, sop_correct: np.ndarray) -> EvalSample:
    return EvalSample(sample.mlm_loss_sum, sample.mlm_count, sample.mlm_correct, sop_correct)


def labels_and_majority(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Eval SOP labels (0/1) and the train-majority baseline's right/wrong (the majority label is 0)."""
    labels = np.random.default_rng(seed).random(n) < 0.508
    return labels, labels == 0


@pytest.mark.parametrize("constant_label, named", [(0, "the train-majority label"), (1, "the other label")])
def test_a_constant_sop_head_is_named_from_the_baselines(constant_label, named):
    candidate, baselines = first_world(0)
    labels, majority = labels_and_majority(candidate.n)
    baselines = Baselines(
        baselines.unigram_loss_sum, baselines.mlm_count, baselines.most_frequent_correct, majority
    )
    head = with_sop(candidate, labels == constant_label)  # right exactly where the label is its one label
    assert named in sop_constant(head, baselines)
    d = decide(head, None, GateConfig(), baselines)
    # The demo's case (always the other label: every pair discordant with the majority baseline).
    if constant_label == 1:
        assert d.checks[1]["test"] == f"exact McNemar, {candidate.n} discordant of {candidate.n}"
    # named, in the warnings (and so the reasons) and on both SOP rows; not a veto
    assert d.promote, d.reasons
    assert (
        len(d.warnings) == 1
        and d.warnings[0].startswith(CONSTANT)
        and "a constant predictor" in d.warnings[0]
    )
    assert d.warnings[0] in d.reasons
    assert [c.get("constant_predictor") for c in d.checks[1:]] == [sop_constant(head, baselines)] * 2
    md = decision_table_markdown(d)
    assert f"**{d.warnings[0]}**" in md and md.count(d.warnings[0]) == 1
    assert md.count("the candidate's head is a constant predictor") == 2


def test_a_head_that_predicts_both_labels_is_not_named():
    candidate, baselines = first_world(1)
    labels, majority = labels_and_majority(candidate.n, 1)
    baselines = Baselines(
        baselines.unigram_loss_sum, baselines.mlm_count, baselines.most_frequent_correct, majority
    )
    nearly = labels == 0
    nearly[0] = not nearly[0]  # one sequence predicted the other way
    assert sop_constant(with_sop(candidate, nearly), baselines) is None
    assert decide(with_sop(candidate, nearly), None, GateConfig(), baselines).warnings == []
    assert sop_constant(candidate, None) is None  # nothing to tell it from


def test_a_constant_head_is_named_against_production_too():
    candidate, baselines = first_world(2)
    labels, majority = labels_and_majority(candidate.n, 2)
    baselines = Baselines(
        baselines.unigram_loss_sum, baselines.mlm_count, baselines.most_frequent_correct, majority
    )
    production = with_sop(candidate, np.random.default_rng(2).random(candidate.n) < 0.5)
    d = decide(with_sop(candidate, labels == 0), production, GateConfig(), baselines)
    assert any(w.startswith(CONSTANT) for w in d.warnings)


# ----------------------------------------------------------------------------- downstream models


def ner_report(found_per_seed: list[np.ndarray]) -> dict:
    """A fine-tuning report's per-example samples: scratch finds entities, pretrained what is given."""
    rng = np.random.default_rng(0)
    gold = 1 + rng.poisson(1.5, 50)

    def sample(found: list[np.ndarray]) -> dict:
        fp = [np.where(f > 0, rng.poisson(0.3, 50), 0) for f in found]  # no prediction: no false positive
        return DownstreamSample(
            "peoples-daily-ner", metric="entity_f1", seeds=[0, 1],
            true_positives=found, false_positives=fp, false_negatives=[gold - f for f in found],
        ).to_json()  # fmt: skip

    finds = [np.minimum(gold, rng.poisson(1.0, 50)) for _ in range(2)]
    models = {"pretrained": {"runs": []}, "scratch": {"runs": []}}
    per_example = {"split": "test", "pretrained": sample(found_per_seed), "scratch": sample(finds)}
    return {"metric": "entity_f1", "models": models, "per_example": per_example, "lift": {"split": "test"}}


def test_an_ner_model_that_finds_no_entity_is_named():
    none = np.zeros(50, dtype=int)
    some = np.ones(50, dtype=int)
    assert downstream_degenerate(ner_report([none, none])) == {"pretrained": "finds no entity (all 2 seeds)"}
    assert downstream_degenerate(ner_report([some, none])) == {"pretrained": "finds no entity (1 of 2 seeds)"}
    assert downstream_degenerate(ner_report([some, some])) == {}


def test_a_classifier_right_on_one_class_only_is_named_from_accuracy_and_macro_f1():
    from model.finetune_train import metrics  # the report's own metrics of a run

    gold = np.random.default_rng(0).integers(0, 2, 400)
    rng = np.random.default_rng(1)
    runs = {
        "constant": [np.zeros(400, int), np.ones(400, int)],
        "learnt": [np.where(rng.random(400) < 0.8, gold, 1 - gold) for _ in range(2)],
        "half": [np.zeros(400, int), np.where(rng.random(400) < 0.8, gold, 1 - gold)],
    }
    report = {
        "metric": "accuracy",
        "labels": ["neg", "pos"],
        "lift": {"split": "test"},
        "models": {
            name: {"runs": [{"seed": s, "test": metrics(p, gold, 2)} for s, p in enumerate(preds)]}
            for name, preds in runs.items()
        },
    }
    assert downstream_degenerate(report) == {
        "constant": "is right on one class only, as a constant predictor (all 2 seeds)",
        "half": "is right on one class only, as a constant predictor (1 of 2 seeds)",
    }
    three = np.random.default_rng(2).integers(0, 3, 300)  # three labels: constant still named
    assert downstream_degenerate(
        {
            **report,
            "labels": ["a", "b", "c"],
            "models": {"m": {"runs": [{"test": metrics(np.full(300, 2), three, 3)}]}},
        }
    ) == {"m": "is right on one class only, as a constant predictor (its one run)"}

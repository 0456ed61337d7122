"""What a newcomer reads of the downstream results and the gate, from the pure functions that write it
(the demo's summary, the run summary, promotion-decision, eval-downstream, the metrics table): the
candidate tuned against the model from scratch tuned by the same search, the lift with its paired
interval, the same-recipe scratch row and the n-gram baselines; a clear line when the candidate is
significantly worse than scratch and what the gate did; and one unit per metric: an entity F1 of
0.1398 reads 13.98% everywhere, never 0.1398."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from flows import demo
from flows.evaluate import metrics_table
from flows.run_summary import summary_markdown
from promotion.downstream import (
    downstream_baselines,
    downstream_description,
    downstream_pairs,
    downstream_rows,
    scratch_samples,
)
from promotion.downstream_stats import paired_difference
from promotion.gate import GateConfig, decide
from promotion.gate_report import promotion_markdown
from promotion.samples import DownstreamSample
from tests.promotion.test_gate import first_world

TASK = "peoples-daily-ner"


def ner_sample(true_positives: int, errors: int, seed: int) -> DownstreamSample:
    """2 seeds x 200 sentences of 5 gold entities each, with these totals of true positives and of
    false positives + false negatives: entity F1 = 2 TP / (2 TP + errors), exactly."""
    rng = np.random.default_rng(seed)
    tp = rng.permutation(np.arange(400) < true_positives % 400) + true_positives // 400  # exact total
    fn = 5 - tp
    fp = np.bincount(rng.integers(0, 400, errors - fn.sum()), minlength=400)
    return DownstreamSample(
        TASK, metric="entity_f1", seeds=[0, 1], true_positives=tp.reshape(2, 200),
        false_positives=fp.reshape(2, 200), false_negatives=fn.reshape(2, 200),
    )  # fmt: skip


@pytest.fixture(scope="module")
def task() -> dict:
    """flows.finetune.downstream_task's result for NER: pretrained 0.1398, scratch 0.2048."""
    cand, scratch = ner_sample(699, 8602, 0), ner_sample(1024, 7952, 1)
    assert (round(cand.value, 10), round(scratch.value, 10)) == (0.1398, 0.2048)
    lift = paired_difference(cand, scratch)
    return {
        "task": TASK, "metric": "entity_f1", "split": "test", "seeds": [0, 1],
        "candidate": cand.value, "scratch": scratch.value, "lift": lift["difference"],
        "lift_ci95": lift["ci95"], "scratch_fits": True,
        "baselines": {"scratch": scratch.value, "scratch_same_recipe": 0.1363, "char_ngram_crf": 0.6842},
        "ci95": {"pretrained": [0.1301, 0.1502], "scratch": [0.1911, 0.2187], "char_ngram_crf": [0.648, 0.721]},
        "differences": {
            "scratch": {"entity_f1": lift["difference"], "entity_f1_paired_ci95": lift["ci95"]},
            "scratch_same_recipe": {"entity_f1": 0.0035, "entity_f1_paired_ci95": [-0.01, 0.017]},
            "char_ngram_crf": {"entity_f1": -0.5444, "entity_f1_paired_ci95": [-0.58, -0.51]},
        },
        "chosen": {
            "pretrained": {"lr": 1e-4, "warmup_fraction": 0.1},
            "scratch": {"lr": 5e-4, "warmup_fraction": 0.1},
            "scratch_same_recipe": {"lr": 1e-4, "warmup_fraction": 0.1},
        },
        "searched": {"pretrained": 4, "scratch": 4},
        "degenerate": {},
        "production": None, "production_ci95": None,
        "candidate_sample": cand.to_json(), "production_sample": None, "scratch_sample": scratch.to_json(),
    }  # fmt: skip


def promotion(task: dict, gate: GateConfig, constant_sop: bool = False) -> dict:
    """The promote flow's result for a first promotion with this task (its decision by the gate);
    `constant_sop`: the candidate's SOP head always predicts the train-majority label."""
    candidate, baselines = first_world(0)
    if constant_sop:
        candidate.sop_correct = baselines.sop_majority_correct.copy()
    d = decide(candidate, None, gate, baselines, downstream_pairs([task]), scratch=scratch_samples([task]))
    promoted = d.promote
    table = metrics_table(
        {
            "candidate": {
                "mlm_loss": 5.5,
                "sop_accuracy": 0.8,
                f"downstream_entity_f1:{TASK}": task["candidate"],
            }
        },
        {"sop_accuracy": {"chance": 0.5}, **downstream_baselines([task])},
    )
    return {
        "event": "promote" if promoted else "reject", "version": "v1" if promoted else None,
        "production": "v1" if promoted else None, "previous": None, "model": "albert",
        "decision": d.to_dict(), "table": table, "candidate": "/runs/x/checkpoints/step-250",
    }  # fmt: skip


def texts(task: dict, promoted: dict) -> dict[str, str]:
    """Every text this change writes about the task, by where it appears."""
    return {
        "demo downstream": "\n".join(f"{a} {b}" for a, b in demo.downstream_rows(task, promoted["decision"])),
        "demo eval": "\n".join(f"{a} {b}" for a, b in demo.eval_rows(promoted["table"])),
        "eval-downstream": json.dumps(downstream_rows([task], None), ensure_ascii=False),
        "promotion-decision": promotion_markdown(promoted, "albert", "/reg/albert"),
        "run-summary": summary_markdown(
            {
                "promotion": promoted,
                "registry": "/r/registry",
                "corpus": {"dir": "/nowhere"},
                "downstream": [task],
            }
        ),
    }


def test_below_scratch_is_refused_and_every_text_says_so_in_percent(task):
    refused = promotion(task, GateConfig())
    assert refused["event"] == "reject"
    for where, text in texts(task, refused).items():
        assert "0.1398" not in text and "0.2048" not in text, where
        if where != "demo eval":
            assert "13.98%" in text, where
    lines = texts(task, refused)
    assert (
        "downstream_entity_f1:peoples-daily-ner candidate 13.98%  | baselines: scratch 20.48%"
        in lines["demo eval"]
    )
    down = lines["demo downstream"]
    assert "pretrained 13.98% [13.01, 15.02] (lr 0.0001, warm-up 0.1; chosen on dev from 4 settings)" in down
    assert (
        "scratch, tuned by the same search 20.48% [19.11, 21.87] (lr 0.0005, warm-up 0.1; chosen on dev from 4 settings)"
        in down
    )
    assert "lift (pretrained - scratch) -6.50 pp [" in down
    same = "scratch_same_recipe 13.63% (scratch at the pretrained model's lr 0.0001, warm-up 0.1; first seed)"
    assert f"{same}: pretrained - it +0.35 pp [-1.00, +1.70]" in down
    assert "vs char_ngram_crf 68.42%: pretrained - it -54.44 pp [-58.00, -51.00]" in down
    assert "SIGNIFICANTLY WORSE THAN SCRATCH" in down and "the gate did not promote it" in down
    warning = refused["decision"]["warnings"][0]
    assert warning.startswith(f"not promoted: significantly worse than scratch on {TASK}")
    assert f"**{warning}**" in lines["run-summary"] and lines["run-summary"].count(warning) == 1
    assert f"**{warning}**" in lines["promotion-decision"]
    assert "| peoples-daily-ner | entity_f1 | 13.98% | 20.48% | -6.50 pp [" in lines["run-summary"]


def test_allowed_below_scratch_is_promoted_and_the_demo_says_why(task, tmp_path):
    allowed = promotion(task, GateConfig(allow_below_scratch=True))
    assert allowed["event"] == "promote"
    warning = f"promoted although significantly worse than scratch on {TASK}, because allow_below_scratch"
    assert allowed["decision"]["warnings"] == [warning]
    assert "promoted anyway, because allow_below_scratch" in texts(task, allowed)["demo downstream"]
    # the whole demo summary: the warning right under the verdict, once; the figures in percent
    text = demo_summary(allowed, task, tmp_path)
    lines = text.splitlines()
    verdict = next(i for i, line in enumerate(lines) if "PROMOTED as v1" in line)
    assert lines[verdict + 1].split(None, 1) == ["WARNING", warning]
    assert text.count(warning) == 1 and "0.1398" not in text and "13.98%" in text
    assert "eval sop_accuracy" in text and "candidate 80.00%" in text and "chance 50.00%" in text
    assert "eval mlm_loss" in text and "candidate 5.500 nats" in text


def demo_summary(promoted: dict, task: dict, tmp_path) -> str:
    """flows.demo.summarize of a run with this promotion and task (the other stages' figures made up)."""
    corpus = tmp_path / "corpus"
    corpus.mkdir(exist_ok=True)
    stats = {"read": 10, "kept": 9, "dropped": {"short": 1}, "dropped_total": 1, "dead_letter_total": 0}
    (corpus / "stats.json").write_text(json.dumps(stats))
    result = {
        "corpus": {"dir": str(corpus)}, "vocab": {"dir": "v", "counts": {"vocab_size": 8000}},
        "instances": {"dir": "i", "summary": {"train": {"instances": 5}, "eval": {"instances": 2}}},
        "pretrain": {"dir": "r", "checkpoint": "r/c", "summary": {}},
        "promotion": promoted, "downstream": [task], "registry": str(tmp_path / "registry"),
    }  # fmt: skip
    return demo.summarize(result, 60.0, "Prefect")


def test_a_constant_sop_head_and_a_model_that_finds_nothing_are_named(task, tmp_path):
    promoted = promotion(task, GateConfig(allow_below_scratch=True), constant_sop=True)
    constant = next(w for w in promoted["decision"]["warnings"] if w.startswith("the SOP head"))
    assert constant.startswith(
        "the SOP head predicts one label for every sequence (the train-majority label)"
    )
    silent = {**task, "degenerate": {"pretrained": "finds no entity (1 of 2 seeds)"}}
    text = demo_summary(promoted, silent, tmp_path)
    assert re.search(rf"^ +WARNING +{re.escape(constant)}$", text, re.M) and text.count(constant) == 1
    assert "NOTE: pretrained finds no entity (1 of 2 seeds)" in text
    assert (
        "- peoples-daily-ner: pretrained finds no entity (1 of 2 seeds)"
        in texts(silent, promoted)["run-summary"]
    )
    assert "pretrained finds no entity" in downstream_description([silent])
    md = texts(silent, promoted)["promotion-decision"]
    assert f"**{constant}**" in md and "the candidate's head is a constant predictor" in md

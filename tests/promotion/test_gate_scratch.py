"""promotion.gate against the model from scratch: pretraining must pay on every downstream task.

A candidate significantly worse than the same architecture fine-tuned from scratch (tuned by the same
search, the same seeds and test examples) is not promoted, at a first promotion and against
production alike, unless GateConfig.allow_below_scratch; then the decision says so in its warnings.
An equal candidate is refused about α of the time or less (the check joins the corrected family)."""

from __future__ import annotations

import numpy as np
import pytest

from core.errors import UserError
from promotion.gate import DownstreamSample, GateConfig, decide
from promotion.gate_report import decision_table_markdown
from tests.promotion.test_gate import binomial_slack, first_world, model, world

ALPHA = 0.05
TASK = "reviews"


def reviews(rng, m: int, acc: float, seeds=(0,)) -> DownstreamSample:
    return DownstreamSample(TASK, rng.random((len(seeds), m)) < acc, seeds=list(seeds))


def first(seed: int, cand_acc: float, scratch_acc: float, m: int = 500, gate: GateConfig = GateConfig()):
    """A first promotion (the candidate beats the unigram, SOP 80%) with one task fine-tuned for the
    candidate and from scratch."""
    candidate, baselines = first_world(seed)
    rng = np.random.default_rng(1000 + seed)
    cand, scratch = reviews(rng, m, cand_acc), reviews(rng, m, scratch_acc)
    return decide(candidate, None, gate, baselines, downstream=(cand, None), scratch={TASK: scratch})


def scratch_row(decision) -> dict:
    return next(c for c in decision.checks if c["reference_kind"] == "scratch")


def test_a_first_promotion_below_scratch_is_refused_with_the_reason():
    d = first(0, cand_acc=0.70, scratch_acc=0.85)
    row = scratch_row(d)
    assert not d.promote and row["ok"] is False and "allowed" not in row
    assert (
        row["metric"] == "downstream_accuracy"
        and row["task"] == TASK
        and row["test"].startswith("exact McNemar")
    )
    assert all(c["ok"] for c in d.checks if c is not row)  # the one reason it is not promoted
    reason = next(r for r in d.reasons if r.startswith(f"downstream_accuracy ({TASK})") and "vs scratch" in r)
    assert "significantly worse than the model from scratch" in reason and "not promoted" in reason
    assert "Bonferroni-adjusted over 3 secondaries" in reason  # two SOP checks and this one
    assert d.warnings == [
        f"not promoted: significantly worse than scratch on {TASK}, so pretraining did not pay there "
        "(allow_below_scratch promotes such a candidate anyway)"
    ]
    assert d.warnings[0] in d.reasons
    # the first promotion has no production: no "no result for the production" line
    assert not any("no result for the production" in r for r in d.reasons)


def test_allow_below_scratch_promotes_and_says_so():
    d = first(0, cand_acc=0.70, scratch_acc=0.85, gate=GateConfig(allow_below_scratch=True))
    row = scratch_row(d)
    assert d.promote and row["ok"] is False and row["allowed"] is True
    assert d.warnings == [
        f"promoted although significantly worse than scratch on {TASK}, because allow_below_scratch"
    ]
    reason = next(r for r in d.reasons if "vs scratch" in r)
    assert reason.endswith("allowed only because allow_below_scratch")
    md = decision_table_markdown(d)
    assert md.count(d.warnings[0]) == 1 and f"**{d.warnings[0]}**" in md  # in bold at the top, once
    assert "| reviews accuracy vs scratch | -" in md and "| **NO** (allowed) |" in md
    assert "Significantly worse than a task's model from scratch is allowed here (allow_below_scratch)." in md


def test_a_candidate_at_least_as_good_as_scratch_passes():
    d = first(1, cand_acc=0.85, scratch_acc=0.75)
    assert d.promote, d.reasons
    assert scratch_row(d)["ok"] and scratch_row(d)["delta"] > 0 and d.warnings == []


def test_an_equal_candidate_is_refused_at_most_alpha_of_the_time():
    # Candidate and scratch equal in truth (85% on 500 reviews): the scratch check is one more test of
    # the corrected family, so noise alone refuses the candidate at most α of the time.
    runs = 300
    refused = [not scratch_row(first(seed, 0.85, 0.85))["ok"] for seed in range(runs)]
    assert np.mean(refused) <= ALPHA / 3 + binomial_slack(ALPHA / 3, runs), np.mean(refused)


def test_the_scratch_check_also_runs_against_production():
    rng = np.random.default_rng(7)
    count, difficulty = world(rng)
    production = model(rng, count, difficulty, 6.0)
    candidate = model(rng, count, difficulty, 5.8)
    candidate.sop_correct = production.sop_correct.copy()
    same = reviews(rng, 500, 0.70)
    pair = (same, DownstreamSample(TASK, same.correct.copy()))  # no change against production
    d = decide(candidate, production, downstream=pair, scratch={TASK: reviews(rng, 500, 0.85)})
    kinds = [(c["metric"], c["reference_kind"]) for c in d.checks]
    assert kinds == [
        ("mlm_loss", "production"),
        ("sop_accuracy", "production"),
        ("downstream_accuracy", "production"),
        ("downstream_accuracy", "scratch"),
    ]
    assert not d.promote and [c["ok"] for c in d.checks] == [True, True, True, False]
    # without a scratch result the task is compared with production only, and a reason says so
    d = decide(candidate, production, downstream=pair)
    assert (
        d.promote
        and f"downstream_accuracy ({TASK}): not compared with scratch (no result for the model from scratch)"
        in d.reasons
    )


def test_scratch_must_have_the_candidates_seeds_and_examples():
    candidate, baselines = first_world(2)
    rng = np.random.default_rng(2)
    cand = reviews(rng, 300, 0.8, seeds=(0, 1))
    with pytest.raises(
        UserError, match="not fine-tuned with the same seeds: candidate \\[0, 1\\], scratch \\[5, 6\\]"
    ):
        decide(
            candidate,
            None,
            GateConfig(),
            baselines,
            (cand, None),
            scratch={TASK: reviews(rng, 300, 0.8, (5, 6))},
        )
    with pytest.raises(UserError, match="not on the same test set"):
        decide(
            candidate,
            None,
            GateConfig(),
            baselines,
            (cand, None),
            scratch={TASK: reviews(rng, 299, 0.8, (0, 1))},
        )


def test_a_refused_task_is_not_compared_with_scratch_either():
    candidate, baselines = first_world(3)
    rng = np.random.default_rng(3)
    d = decide(
        candidate, None, GateConfig(), baselines, (reviews(rng, 300, 0.5), None),
        decontaminated={TASK: False}, scratch={TASK: reviews(rng, 300, 0.9)},
    )  # fmt: skip
    assert not d.promote and not any(c["reference_kind"] == "scratch" for c in d.checks)
    assert any("REFUSED" in r for r in d.reasons) and d.warnings == []


def test_entity_f1_below_scratch_over_seeds_is_refused():
    # The demo's case: entity F1 about 6.5 points below scratch over 2 seeds x 400 sentences.
    from tests.promotion.test_gate_seeds import ner_model, ner_world

    candidate, baselines = first_world(4)
    rng = np.random.default_rng(4)
    ner = ner_world(rng, 400)
    cand = ner_model(rng, ner, seeds=(0, 1), recall_shift=-0.10)
    scratch = ner_model(rng, ner, seeds=(0, 1))
    d = decide(candidate, None, GateConfig(), baselines, (cand, None), scratch={cand.task: scratch})
    row = scratch_row(d)
    assert not d.promote and not row["ok"] and row["test"] == "two-way bootstrap z, 2 seeds x 400 examples"
    assert row["ci95"][1] < 0 and "peoples-daily-ner" in d.warnings[0]

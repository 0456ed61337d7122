"""promotion.gate: the statistical promotion gate on constructed cases with a known truth.

Simulated world (fixed seeds): N eval sequences with 5-20 real masked predictions each and a
per-sequence difficulty that every model shares; a model's per-sequence loss sum is
count · (mean loss + difficulty) + per-token noise (sd 0.8 nats). SOP and downstream correctness are
drawn independently per model and example with the model's true accuracy, so two models of EQUAL
quality differ by several accuracy points by chance (sd of the difference ≈ 2.3 points on 500
reviews at 85%), which is what fooled the old fixed-margin gate."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from core.errors import UserError
from promotion.gate import (
    Baselines,
    Decision,
    DownstreamSample,
    EvalSample,
    GateConfig,
    decide,
)
from promotion.gate_report import decision_table_markdown, format_p

ALPHA = 0.05


# ---------------------------------------------------------------------------------------- the world


def world(rng, n: int = 700):
    count = rng.integers(5, 21, n)
    difficulty = rng.normal(0.0, 1.0, n)
    return count, difficulty


def model(rng, count, difficulty, mean_loss=6.0, sop_acc=0.8, mlm_acc=0.4, token_sd=0.8) -> EvalSample:
    loss = count * (mean_loss + difficulty) + rng.normal(0.0, token_sd * np.sqrt(count))
    return EvalSample(
        mlm_loss_sum=np.clip(loss, 0.0, None),
        mlm_count=count,
        mlm_correct=rng.binomial(count, mlm_acc),
        sop_correct=rng.random(count.size) < sop_acc,
    )


def reviews(rng, m: int, acc: float, task: str = "reviews") -> DownstreamSample:
    return DownstreamSample(task, rng.random(m) < acc)


def duel(
    seed: int,
    mlm_gain: float = 0.1,
    sop=(0.8, 0.8),
    downstream=(0.85, 0.85),
    m: int = 500,
    n: int = 700,
    gate: GateConfig = GateConfig(),
) -> Decision:
    """Candidate vs production: true MLM gain, true (candidate, production) SOP and downstream accuracy."""
    rng = np.random.default_rng(seed)
    count, difficulty = world(rng, n)
    production = model(rng, count, difficulty, 6.0, sop_acc=sop[1])
    candidate = model(rng, count, difficulty, 6.0 - mlm_gain, sop_acc=sop[0])
    pair = (reviews(rng, m, downstream[0]), reviews(rng, m, downstream[1]))
    return decide(candidate, production, gate, downstream=pair)


def rate(decisions) -> float:
    return float(np.mean([d.promote for d in decisions]))


def binomial_slack(p: float, runs: int) -> float:
    """2.5 standard deviations of a rate p measured over `runs` independent seeds."""
    return 2.5 * (p * (1 - p) / runs) ** 0.5


def check_for(decision: Decision, metric: str) -> dict:
    return next(c for c in decision.checks if c["metric"] == metric)


# --------------------------------------------------------------------- (a) noise must not reject


def test_equal_quality_secondaries_do_not_veto_a_real_improvement():
    # SOP 80% on 700 pairs and downstream 85% on 500 reviews for BOTH models; MLM truly 0.1 nats better.
    runs = 300
    decisions = [duel(seed) for seed in range(runs)]
    assert all(check_for(d, "mlm_loss")["ok"] for d in decisions)
    assert rate(decisions) >= 1 - ALPHA - 0.01, rate(decisions)
    # and noise did move the accuracies by several points, as in the incident
    drops = [-check_for(d, "downstream_accuracy")["delta"] for d in decisions]
    assert max(drops) >= 0.04


def _reviews_with(both: int, cand_only: int, prod_only: int, neither: int) -> tuple[np.ndarray, np.ndarray]:
    cand = np.array([1] * both + [1] * cand_only + [0] * prod_only + [0] * neither, dtype=bool)
    prod = np.array([1] * both + [0] * cand_only + [1] * prod_only + [0] * neither, dtype=bool)
    order = np.random.default_rng(0).permutation(cand.size)
    return cand[order], prod[order]


def test_downstream_four_points_lower_by_chance_still_promotes():
    # The demo incident: 500 reviews, production 0.860, candidate 0.820, with the overlap two
    # independent 85% models have (353 both right, 57 + 77 discordant). MLM truly better.
    cand_ok, prod_ok = _reviews_with(353, 57, 77, 13)
    assert (cand_ok.mean(), prod_ok.mean()) == (pytest.approx(0.82), pytest.approx(0.86))
    rng = np.random.default_rng(12)
    count, difficulty = world(rng)
    production = model(rng, count, difficulty, 6.0)
    candidate = model(rng, count, difficulty, 5.9)
    candidate.sop_correct = production.sop_correct.copy()  # SOP unchanged
    d = decide(
        candidate,
        production,
        downstream=(DownstreamSample("reviews", cand_ok), DownstreamSample("reviews", prod_ok)),
    )
    assert d.promote, d.reasons
    row = check_for(d, "downstream_accuracy")
    assert row["delta"] == pytest.approx(-0.04) and row["ok"]
    assert row["p_raw"] == pytest.approx(0.05, abs=0.01)  # one-sided exact McNemar, 77 vs 57
    assert row["p_value"] == pytest.approx(2 * row["p_raw"])  # Bonferroni over SOP and downstream
    assert row["test"] == "exact McNemar, 134 discordant of 500"
    reason = next(r for r in d.reasons if r.startswith("downstream_accuracy"))
    assert "not a significant regression" in reason and "change -4.00 pp [" in reason
    assert "82.00% vs production 86.00%" in reason  # one unit: a proportion in percent, never 0.82


# -------------------------------------------------------------------- (b) real regressions reject


def test_downstream_truly_eight_points_worse_is_rejected():
    runs = 200
    decisions = [duel(seed, downstream=(0.77, 0.85), m=1000) for seed in range(runs)]
    rejected = [d for d in decisions if not d.promote]
    assert len(rejected) >= 0.95 * runs, len(rejected)
    for d in rejected:
        assert not check_for(d, "downstream_accuracy")["ok"]
        assert any(r.startswith("downstream_accuracy") and "significant regression" in r for r in d.reasons)


def test_sop_truly_ten_points_worse_is_rejected():
    runs = 200
    decisions = [duel(seed, sop=(0.7, 0.8)) for seed in range(runs)]
    rejected = [d for d in decisions if not d.promote]
    assert len(rejected) >= 0.95 * runs, len(rejected)
    for d in rejected:
        assert any(r.startswith("sop_accuracy") and "significant regression" in r for r in d.reasons)


# ---------------------------------------------------------------- (c)/(d) the primary MLM test


def test_mlm_improvement_that_is_pure_noise_is_not_promoted():
    # Same per-sequence loss distribution: the primary test promotes at most α of the time. The
    # nominal non-promotion rate is exactly 1 - α = 95%, so the bound allows the seeds' binomial noise.
    runs = 1000
    decisions = [duel(seed, mlm_gain=0.0) for seed in range(runs)]
    promoted = rate(decisions)
    assert promoted <= ALPHA + binomial_slack(ALPHA, runs), promoted
    false_primary = np.mean([check_for(d, "mlm_loss")["ok"] for d in decisions])
    assert abs(false_primary - ALPHA) <= binomial_slack(ALPHA, runs), false_primary  # calibrated, not timid


def test_real_mlm_improvement_of_005_nats_on_700_sequences_is_promoted():
    d = duel(11, mlm_gain=0.05)
    assert d.promote, d.reasons
    row = check_for(d, "mlm_loss")
    assert row["role"] == "primary" and row["reference_kind"] == "production"
    assert row["test"] == "paired z, 700 sequences" and row["n"] == 700
    assert row["ci95"][0] < 0.05 < row["ci95"][1] and row["p_value"] < ALPHA
    assert d.reasons[0].startswith("mlm_loss ") and "nats" in d.reasons[0]
    runs = 200
    assert rate(duel(seed, mlm_gain=0.05) for seed in range(runs)) >= 0.9


def test_worse_candidate_is_not_promoted():
    d = duel(3, mlm_gain=-0.05)
    assert not d.promote
    assert "not significantly more than δ=0" in d.reasons[0]


def test_min_improvement_is_a_margin_the_improvement_must_significantly_exceed():
    gate = GateConfig(min_improvement=0.05)
    runs = 300
    at_margin = rate(duel(seed, mlm_gain=0.05, gate=gate) for seed in range(runs))
    assert at_margin <= ALPHA + binomial_slack(ALPHA, runs), at_margin
    assert rate(duel(seed, mlm_gain=0.15, gate=gate) for seed in range(100)) >= 0.95
    assert check_for(duel(0, gate=gate), "mlm_loss")["threshold"] == 0.05


def test_max_regression_tolerates_a_drop_up_to_epsilon():
    gate = GateConfig(max_regression=0.03)
    runs = 300
    # a true drop of exactly ε is vetoed at most α of the time (one secondary: SOP only)
    only_sop = GateConfig(max_regression=0.03, secondary=("sop_accuracy",))
    at_margin = [duel(seed, sop=(0.77, 0.80), n=2000, gate=only_sop) for seed in range(runs)]
    assert 1 - rate(at_margin) <= ALPHA + binomial_slack(ALPHA, runs)
    row = check_for(at_margin[0], "sop_accuracy")
    assert row["threshold"] == -0.03 and row["test"].startswith("paired z vs margin 0.03")
    # a drop well beyond ε is still caught
    assert rate(duel(seed, sop=(0.65, 0.80), gate=gate) for seed in range(100)) <= 0.05


# ------------------------------------------------------------------------- (e) first promotion


def first_world(seed: int, cand_loss: float = 5.5, sop_acc: float = 0.8, majority_share: float = 0.5):
    """A candidate and the trivial baselines on the same eval sequences (no production model)."""
    rng = np.random.default_rng(seed)
    count, difficulty = world(rng)
    candidate = model(rng, count, difficulty, cand_loss, sop_acc=sop_acc, mlm_acc=0.3)
    unigram = np.clip(count * (6.5 + difficulty) + rng.normal(0, 0.8 * np.sqrt(count)), 0, None)
    baselines = Baselines(
        unigram_loss_sum=unigram,
        mlm_count=count,
        most_frequent_correct=rng.binomial(count, 0.05),
        sop_majority_correct=rng.random(count.size) < majority_share,
    )
    return candidate, baselines


def test_first_promotion_beats_unigram_and_sop_is_above_chance():
    candidate, baselines = first_world(0)
    d = decide(candidate, None, GateConfig(), baselines)
    assert d.promote, d.reasons
    kinds = [(c["metric"], c["reference_kind"]) for c in d.checks]
    assert kinds == [
        ("mlm_loss", "baseline:unigram"),
        ("sop_accuracy", "baseline:majority"),
        ("sop_accuracy", "baseline:chance"),
    ]
    assert d.checks[2]["test"] == "exact binomial vs 0.5, 700 examples"
    assert d.info[0]["reference_kind"] == "baseline:most_frequent" and d.info[0]["ok"] is None


def test_first_promotion_rejected_when_sop_is_significantly_below_the_majority_baseline():
    # A skewed eval set: "always the train-majority label" is right 65% of the time; the candidate's
    # SOP is a coin flip. Against chance alone it would pass.
    candidate, baselines = first_world(1, sop_acc=0.5, majority_share=0.65)
    d = decide(candidate, None, GateConfig(), baselines)
    assert not d.promote
    majority = d.checks[1]
    assert majority["reference_kind"] == "baseline:majority" and not majority["ok"]
    assert d.checks[2]["ok"]  # not significantly below chance
    assert any(
        "sop_accuracy" in r and "baseline majority" in r and "significant regression" in r for r in d.reasons
    )


def test_first_promotion_rejected_when_sop_is_below_chance():
    candidate, baselines = first_world(2, sop_acc=0.42)
    d = decide(candidate, None, GateConfig(), baselines)
    assert not d.promote and not d.checks[2]["ok"]


def test_first_promotion_rejected_when_it_does_not_beat_unigram():
    candidate, baselines = first_world(3, cand_loss=6.5)  # the unigram's own level
    d = decide(candidate, None, GateConfig(), baselines)
    assert not d.promote and not d.checks[0]["ok"]
    assert "vs baseline unigram" in d.reasons[0]


def test_no_production_and_no_baselines_is_rejected_with_a_reason():
    candidate, _ = first_world(4)
    d = decide(candidate, None, GateConfig(), None)
    assert not d.promote and d.checks == []
    assert d.reasons == ["no production model and no baselines to beat: nothing to gate against"]


# ----------------------------------------------------------------------------- downstream wiring


def test_downstream_on_one_side_only_is_not_compared():
    rng = np.random.default_rng(5)
    count, difficulty = world(rng)
    production = model(rng, count, difficulty, 6.0)
    candidate = model(rng, count, difficulty, 5.8)
    d = decide(candidate, production, downstream=(reviews(rng, 500, 0.1), None))
    assert d.promote, d.reasons
    assert "downstream_accuracy" not in [c["metric"] for c in d.checks]
    assert "downstream_accuracy (reviews): not compared (no result for the production)" in d.reasons
    sop = check_for(d, "sop_accuracy")
    assert sop["p_value"] == sop["p_raw"]  # a single secondary compared: nothing to correct


def test_several_downstream_tasks_and_mismatched_inputs():
    rng = np.random.default_rng(6)
    count, difficulty = world(rng)
    production = model(rng, count, difficulty, 6.0)
    candidate = model(rng, count, difficulty, 5.8)
    pairs = [(reviews(rng, 300, 0.85, "a"), reviews(rng, 300, 0.85, "a")), (reviews(rng, 200, 0.7, "b"),) * 2]
    d = decide(candidate, production, downstream=pairs)
    assert [c.get("task") for c in d.checks] == [None, None, "a", "b"]
    assert check_for(d, "sop_accuracy")["test"].startswith("exact McNemar")
    with pytest.raises(UserError, match="not on the same test set"):
        decide(candidate, production, downstream=(reviews(rng, 300, 0.8), reviews(rng, 299, 0.8)))
    short = model(rng, count[:-1], difficulty[:-1])
    with pytest.raises(UserError, match="not the same eval set"):
        decide(short, production)
    shifted = model(rng, count + 1, difficulty)
    with pytest.raises(UserError, match="differ on 700 sequences"):
        decide(shifted, production)


def test_holm_and_bonferroni_give_the_same_verdicts():
    for seed in range(60):
        b = duel(seed, mlm_gain=0.1, downstream=(0.82, 0.85))
        h = duel(seed, mlm_gain=0.1, downstream=(0.82, 0.85), gate=GateConfig(correction="holm"))
        assert b.promote == h.promote
        assert all(hc["p_value"] <= bc["p_value"] for hc, bc in zip(h.checks, b.checks))


# ------------------------------------------------------------------------------- rows and markdown


def test_check_rows_carry_every_field_and_serialise_as_strict_json():
    d = duel(8)
    keys = {
        "metric",
        "candidate",
        "reference",
        "reference_kind",
        "delta",
        "ci95",
        "p_value",
        "test",
        "threshold",
        "role",
        "n",
        "ok",
    }
    for row in d.checks:
        assert keys <= row.keys()
        lo, hi = row["ci95"]
        assert lo <= row["delta"] <= hi
    assert [c["role"] for c in d.checks] == ["primary", "secondary", "secondary"]
    text = json.dumps(d.to_dict(), allow_nan=False)
    assert json.loads(text)["gate"]["alpha"] == 0.05


def test_decision_table_markdown_shows_intervals_and_p_values():
    d = duel(9)
    md = decision_table_markdown(d)
    assert md.startswith("Gate: **pass**")
    assert "- mlm_loss vs production: primary," in md and "- mlm_accuracy vs production: info," in md
    assert re.search(
        r"^\| mlm_loss vs production \| [+-][0-9.]+ nats \[[+-][0-9.]+, [+-][0-9.]+\] \| [0-9e.-]+ \| yes \|$",
        md,
        re.M,
    )
    assert "95% CI" in md and "exact McNemar" in md and "Bonferroni-adjusted over 2 secondaries" in md
    # one unit per metric: accuracies in percent, their changes in percentage points
    assert re.search(r"^\| reviews accuracy vs production \| [+-]\d+\.\d\d pp \[", md, re.M)
    assert re.search(r"^\| reviews accuracy vs production \| \d+\.\d\d% \| \d+\.\d\d% \|$", md, re.M)
    assert md == decision_table_markdown(d.to_dict())
    assert "Gate: **fail**" in decision_table_markdown(duel(9, downstream=(0.6, 0.85)))


def test_format_p():
    assert [format_p(p) for p in (0.12, 0.0504, 0.0012, 3e-8, 1.0, 0.0)] == [
        "0.12",
        "0.0504",
        "0.0012",
        "3e-8",
        "1",
        "<1e-300",
    ]


# --------------------------------------------------------------------------------- (f) JSON forms


def test_samples_round_trip_through_json():
    rng = np.random.default_rng(10)
    count, difficulty = world(rng, 50)
    sample = model(rng, count, difficulty)
    data = json.loads(json.dumps(sample.to_json()))
    assert data["kind"] == "albert-eval-sample" and data["n"] == 50
    assert isinstance(data["sop_correct"], str) and set(data["sop_correct"]) <= {"0", "1"}
    assert all(isinstance(x, int) for x in data["mlm_count"])
    back = EvalSample.from_json(data)
    assert back == sample and EvalSample.from_json(json.dumps(data)) == sample
    assert np.array_equal(back.mlm_loss_sum, sample.mlm_loss_sum)  # floats exact, not rounded

    _, baselines = first_world(11)
    assert Baselines.from_json(json.dumps(baselines.to_json())) == baselines
    ds = reviews(rng, 37, 0.8, "tnews")
    # version 2: one bit string per fine-tuning seed (here one seed)
    assert ds.to_json()["correct"] == ["".join("1" if x else "0" for x in ds.correct[0])]
    assert DownstreamSample.from_json(ds.to_json()) == ds
    assert DownstreamSample.from_json({"task": "t", "correct": [True, 0, 1]}).correct.tolist() == [
        [True, False, True]
    ]


def test_json_of_the_wrong_kind_or_shape_is_a_user_error():
    ds = DownstreamSample("t", [True, False])
    with pytest.raises(UserError, match="kind"):
        EvalSample.from_json(ds.to_json())
    with pytest.raises(UserError, match="no 'mlm_count'"):
        EvalSample.from_json({"mlm_loss_sum": [1.0], "mlm_correct": [0], "sop_correct": "1"})
    with pytest.raises(UserError, match="only '0' and '1'"):
        DownstreamSample("t", "01x")


# ------------------------------------------------------------------------ (g) validation messages


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(alpha=0.0), "alpha must be in (0, 0.5)"),
        (dict(alpha=0.7), "alpha must be in (0, 0.5)"),
        (dict(alpha="0.05"), "alpha must be a finite number"),
        (dict(min_improvement=-0.01), "min_improvement (δ) must be >= 0"),
        (dict(min_improvement=float("nan")), "must be a finite number"),
        (dict(max_regression=1.5), "max_regression (ε) must be in [0, 1)"),
        (dict(primary="sop_accuracy"), "the primary metric must be 'mlm_loss'"),
        (dict(secondary=("sop_accuracy", "bleu")), "unknown secondary metric(s) ['bleu']"),
        (dict(correction="sidak"), "correction must be one of"),
        (dict(allow_below_scratch="yes"), "allow_below_scratch must be true or false"),
    ],
)
def test_gate_config_errors_are_one_line(kwargs, message):
    with pytest.raises(UserError) as err:
        GateConfig(**kwargs)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_gate_config_defaults_and_list_secondary():
    g = GateConfig(secondary=["sop_accuracy"])
    assert g.secondary == ("sop_accuracy",)
    assert GateConfig().to_dict() == {
        "min_improvement": 0.0,
        "max_regression": 0.0,
        "alpha": 0.05,
        "primary": "mlm_loss",
        "secondary": ["sop_accuracy", "downstream_accuracy"],
        "correction": "bonferroni",
        "allow_below_scratch": False,
    }


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(mlm_loss_sum=[1.0, -1.0]), "mlm_loss_sum: expected finite numbers >= 0"),
        (dict(mlm_count=[1, 2, 3]), "arrays of different lengths"),
        (dict(mlm_correct=[2, 5]), "mlm_correct exceeds mlm_count"),
        (dict(sop_correct=[0, 2]), "sop_correct: expected booleans"),
    ],
)
def test_eval_sample_validation_errors_are_one_line(kwargs, message):
    fields = dict(mlm_loss_sum=[1.0, 2.0], mlm_count=[2, 3], mlm_correct=[1, 1], sop_correct=[True, False])
    with pytest.raises(UserError) as err:
        EvalSample(**{**fields, **kwargs})
    assert message in str(err.value) and "\n" not in str(err.value)

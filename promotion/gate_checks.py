"""The gate's tests, one function per kind of check, each returning one row of the decision's table
(promotion/gate.py assembles them, corrects the secondaries' p-values and decides; docs/gate.md says
why each test is the one used).

A row: metric, role ("primary" | "secondary" | "info"), reference_kind, candidate, reference, delta
(+ = the candidate is better), ci95 [lo, hi] of delta (None for an unbounded end: valid JSON), p_value
and p_raw (equal until the gate corrects the secondaries), test, threshold, n, ok (None until the gate
decides), and task for a downstream row.
"""

from __future__ import annotations

import math

import numpy as np

from promotion.downstream_stats import paired_difference
from promotion.samples import DownstreamSample, EvalSample
from promotion.stats import (
    mcnemar,
    normal_sf,
    one_sample_proportion_vs,
    paired_proportion_difference,
    paired_ratio_difference,
    wilson,
)

PRIMARY = "mlm_loss"


def _finite(x: float) -> float | None:
    """JSON has no inf/NaN: an unbounded interval end becomes None."""
    return float(x) if math.isfinite(x) else None


def row(metric: str, role: str, reference_kind: str, **values) -> dict:
    """A check row; numbers become Python floats and an unbounded interval end None (valid JSON)."""
    lo, hi = values.pop("ci95")
    p = float(values.pop("p"))
    out = dict(metric=metric, role=role, reference_kind=reference_kind, ci95=[_finite(lo), _finite(hi)])
    out.update(p_value=p, p_raw=p, ok=None)
    for key in ("candidate", "reference", "delta"):
        out[key] = float(values.pop(key))
    out["n"] = int(values.pop("n"))
    out.update(values)  # test, threshold, task
    return out


def z_p(excess: float, se: float) -> float:
    """One-sided p of H0 "true value <= threshold" when the estimate exceeds it by `excess`."""
    if se == 0:
        return 0.0 if excess > 0 else 1.0
    return normal_sf(excess / se) if math.isfinite(se) else 1.0


def loss_check(candidate: EvalSample, ref_loss_sum: np.ndarray, kind: str, threshold: float) -> dict:
    """Primary: improvement = reference loss - candidate loss (nats/prediction), paired per sequence."""
    estimate = paired_ratio_difference(ref_loss_sum, candidate.mlm_loss_sum, candidate.mlm_count)
    p = z_p(estimate["diff"] - threshold, estimate["se"])  # H0: improvement <= threshold
    return row(
        PRIMARY,
        "primary",
        kind,
        candidate=estimate["ratio_b"],
        reference=estimate["ratio_a"],
        delta=estimate["diff"],
        ci95=estimate["ci95"],
        p=p,
        test=f"paired z, {estimate['n']} sequences",
        threshold=threshold,
        n=estimate["n"],
    )


def accuracy_info(candidate: EvalSample, ref_correct: np.ndarray, kind: str) -> dict:
    """MLM accuracy, shown not gated: the same per-sequence ratio estimator, two-sided p."""
    estimate = paired_ratio_difference(candidate.mlm_correct, ref_correct, candidate.mlm_count)
    p = min(1.0, 2 * z_p(abs(estimate["diff"]), estimate["se"]))
    return row(
        "mlm_accuracy",
        "info",
        kind,
        candidate=estimate["ratio_a"],
        reference=estimate["ratio_b"],
        delta=estimate["diff"],
        ci95=estimate["ci95"],
        p=p,
        test=f"paired z two-sided, {estimate['n']} sequences",
        threshold=None,
        n=estimate["n"],
    )


def paired_regression(metric: str, cand: np.ndarray, ref: np.ndarray, kind: str, eps: float, **extra) -> dict:
    """Secondary on the same examples: H0 "drop <= ε", H1 "the candidate is worse by more than ε".

    ε = 0: exact McNemar (H1: the reference is right more often on the discordant examples); exact
    for any n, and the examples both models get right or wrong drop out as they should.
    ε > 0: z = (drop - ε)/se with the paired Wald se (McNemar has no margin); fine once the number
    of discordant examples is in the tens, which is where a margin is worth having."""
    d = paired_proportion_difference(cand, ref)  # diff = acc_cand - acc_ref; b: cand right, ref wrong
    discordant = f"{d['b'] + d['c']} discordant of {d['n']}"
    if eps == 0:
        p, test = mcnemar(d["c"], d["b"]), f"exact McNemar, {discordant}"
    else:
        p, test = z_p(-d["diff"] - eps, d["se"]), f"paired z vs margin {eps:g}, {discordant}"
    return row(
        metric,
        "secondary",
        kind,
        candidate=d["acc_a"],
        reference=d["acc_b"],
        delta=d["diff"],
        ci95=d["ci95"],
        p=p,
        test=test,
        threshold=-eps if eps else 0.0,
        n=d["n"],
        **extra,
    )


def chance_regression(metric: str, cand: np.ndarray, chance: float, eps: float) -> dict:
    """Secondary against a constant: exact binomial, H1 "accuracy < chance - ε"."""
    n, k = int(cand.size), int(np.count_nonzero(cand))
    p0 = chance - eps
    p = one_sample_proportion_vs(p0, k, n, "less") if p0 > 0 else 1.0
    lo, hi = wilson(k, n)
    acc = k / n if n else 0.0
    return row(
        metric,
        "secondary",
        "baseline:chance",
        candidate=acc,
        reference=chance,
        delta=acc - chance,
        ci95=[lo - chance, hi - chance],
        p=p,
        test=f"exact binomial vs {p0:g}, {n} examples",
        threshold=-eps if eps else 0.0,
        n=n,
    )


def downstream_regression(cand: DownstreamSample, ref: DownstreamSample, kind: str, eps: float) -> dict:
    """Secondary for one task against a reference fine-tuned on the same examples with the same seeds
    (production, or the model from scratch), H0 "drop <= ε" in the metric's own units.

    One seed, accuracy: paired_regression (exact McNemar, or the paired z against ε). Otherwise
    z = (-(difference) - ε) / se with the two-way (seeds x examples) paired bootstrap's se and
    percentile interval: fine-tuning swings between seeds, and a test over the examples alone would
    call a seed-to-seed difference significant."""
    metric = f"downstream_{cand.metric}"
    if cand.metric == "accuracy" and cand.k == 1:
        return paired_regression(metric, cand.correct[0], ref.correct[0], kind, eps, task=cand.task)
    d = paired_difference(cand, ref)
    seeds = f"{cand.k} seed{'s' if cand.k > 1 else ''} x {cand.n} examples"
    return row(
        metric,
        "secondary",
        kind,
        candidate=cand.value,
        reference=ref.value,
        delta=d["difference"],
        ci95=d["ci95"],
        p=z_p(-d["difference"] - eps, d["se"]),
        test=f"two-way bootstrap z{f' vs margin {eps:g}' if eps else ''}, {seeds}",
        threshold=-eps if eps else 0.0,
        n=cand.n,
        task=cand.task,
    )

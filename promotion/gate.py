"""The promotion gate, statistically: promote a candidate checkpoint only when the eval data show that it
is better, and reject it only when they show that it is worse. Pure logic: no Prefect, no torch.

The old gate compared two numbers per metric against fixed margins, so sampling noise decided: on 500
test reviews one model's downstream accuracy moves ±4 points between runs. This gate compares the
per-example results of the two models on the same examples (paired), with tests and intervals from
promotion/stats.py. docs/gate.md gives the rules, the defaults and the simulated error rates;
promotion/gate_report.py renders a decision for people.

Rules (α = GateConfig.alpha, δ = min_improvement, ε = max_regression):
- primary, MLM loss: paired per eval sequence; one-sided z-test of H0 "improvement <= δ" (against
  production) or "improvement <= 0" (against the unigram baseline, first promotion). Promote only if
  p < α. This bounds the chance of promoting a model that is not better by α.
- secondaries, SOP and each downstream task (accuracy or entity F1, over k fine-tuning seeds): one-sided
  tests of H0 "the drop is <= ε" (one seed and right/wrong: exact McNemar when ε = 0, a paired z-test
  against the margin otherwise; several seeds or F1: a z-test with the two-way seeds x examples
  bootstrap's se, promotion/downstream_stats.py; against chance an exact binomial test).
  Reject if any p, Bonferroni- (or Holm-) adjusted over the secondaries actually compared, is < α.
  This bounds by α the chance that noise alone vetoes a candidate whose secondaries did not get worse.
- first promotion (no production): the loss must beat the unigram baseline significantly, and SOP may
  not be significantly below the train-majority baseline (paired) nor below chance (exact binomial).

Inputs are per-example arrays in the SAME order for every model (index i = eval sequence i, or test
example j of a downstream task; downstream results also with the same fine-tuning seeds). They travel as JSON (`to_json` / `from_json`), never pickle.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from core.errors import UserError
from core.figures import sig, signed
from promotion.decontamination import refused_tasks, task_of
from promotion.downstream_stats import paired_difference, require_comparable
from promotion.gate_report import correction_label, format_p, vs_label
from promotion.samples import Baselines, DownstreamSample, EvalSample
from promotion.stats import (
    bonferroni,
    holm,
    mcnemar,
    normal_sf,
    one_sample_proportion_vs,
    paired_proportion_difference,
    paired_ratio_difference,
    wilson,
)

PRIMARY = "mlm_loss"
SECONDARY = ("sop_accuracy", "downstream_accuracy")
CORRECTIONS = {"bonferroni": bonferroni, "holm": holm}
DownstreamPair = tuple[DownstreamSample | None, DownstreamSample | None]
"""(candidate, production) results of one downstream task; either side may be missing."""

# ------------------------------------------------------------------------------------------ config


NUMBERS = {
    "min_improvement": (">= 0 (nats)", lambda x: x >= 0),
    "max_regression": ("in [0, 1)", lambda x: 0 <= x < 1),
    "alpha": ("in (0, 0.5)", lambda x: 0 < x < 0.5),
}
"""The gate's numbers: what each must be, and the test. GateConfig is their one validator."""
SYMBOLS = {"min_improvement": "δ", "max_regression": "ε"}


def _finite_number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)


class GateNumberError(UserError):
    """A number of GateConfig outside its range, said the gate's way ("gate: alpha must be ...");
    `named(name)` says the same rule with the name the caller's user typed (`--alpha`, a parameter)."""

    def __init__(self, field_name: str, value: Any):
        self.field_name, self.value, self.rule = field_name, value, NUMBERS[field_name][0]
        label = f"{field_name} ({SYMBOLS[field_name]})" if field_name in SYMBOLS else field_name
        if _finite_number(value):
            super().__init__(f"gate: {label} must be {self.rule}, got {value}")
        else:
            super().__init__(f"gate: {label} must be a finite number, got {value!r}")

    def named(self, name: str) -> UserError:
        return UserError(f"{name} must be {self.rule}, got {self.value}")


@dataclass(frozen=True)
class GateConfig:
    """The gate's knobs. docs/gate.md says how to choose them."""

    min_improvement: float = 0.0
    """δ (nats per masked prediction): promote only if the MLM loss improvement over production is
    significantly GREATER than δ. 0: any real improvement."""
    max_regression: float = 0.0
    """ε (in [0, 1), the metric's own units: accuracy, or entity F1): a secondary metric regresses
    when its drop is significantly greater than ε. 0: any real drop vetoes."""
    alpha: float = 0.05
    """Significance level of the primary test, and the family-wise level of the secondary tests."""
    primary: str = PRIMARY
    secondary: tuple[str, ...] = SECONDARY
    correction: str = "bonferroni"
    """Multiple-comparison correction over the secondaries compared: "bonferroni" or "holm". Both
    give the same verdict (the gate asks whether ANY secondary regresses: min p < α/m); Holm's
    adjusted p-values of the non-minimal rows are smaller."""

    def __post_init__(self):
        for field_name, (_, within) in NUMBERS.items():
            value = getattr(self, field_name)
            if not (_finite_number(value) and within(value)):
                raise GateNumberError(field_name, value)
        if self.primary != PRIMARY:
            raise UserError(f"gate: the primary metric must be {PRIMARY!r}, got {self.primary!r}")
        secondary = (self.secondary,) if isinstance(self.secondary, str) else tuple(self.secondary)
        unknown = [m for m in secondary if m not in SECONDARY]
        if unknown:
            raise UserError(f"gate: unknown secondary metric(s) {unknown}; known: {list(SECONDARY)}")
        if self.correction not in CORRECTIONS:
            raise UserError(f"gate: correction must be one of {sorted(CORRECTIONS)}, got {self.correction!r}")
        object.__setattr__(self, "secondary", secondary)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["secondary"] = list(self.secondary)
        return d


# ------------------------------------------------------------------------------------------ output


@dataclass
class Decision:
    promote: bool
    reasons: list[str]
    """One readable sentence per check, then one per metric that could not be compared."""
    checks: list[dict] = field(default_factory=list)
    """One row per test: metric, candidate, reference, reference_kind, delta (+ = candidate better),
    ci95 [lo, hi] of delta, p_value (adjusted for secondaries), p_raw, test, threshold, role
    ("primary" | "secondary"), n, ok; downstream rows (metric "downstream_accuracy" or
    "downstream_entity_f1") add task."""
    info: list[dict] = field(default_factory=list)
    """Rows shown but not gated (MLM accuracy), in the same form; ok is None."""
    gate: dict = field(default_factory=dict)
    """The GateConfig used."""

    def to_dict(self) -> dict:
        return asdict(self)


def _finite(x: float) -> float | None:
    """JSON has no inf/NaN: an unbounded interval end becomes None."""
    return float(x) if math.isfinite(x) else None


def _row(metric: str, role: str, reference_kind: str, **values) -> dict:
    """A check row; numbers become Python floats and an unbounded interval end None (valid JSON)."""
    lo, hi = values.pop("ci95")
    p = float(values.pop("p"))
    row = dict(metric=metric, role=role, reference_kind=reference_kind, ci95=[_finite(lo), _finite(hi)])
    row.update(p_value=p, p_raw=p, ok=None)
    for key in ("candidate", "reference", "delta"):
        row[key] = float(values.pop(key))
    row["n"] = int(values.pop("n"))
    row.update(values)  # test, threshold, task
    return row


def _z_p(excess: float, se: float) -> float:
    """One-sided p of H0 "true value <= threshold" when the estimate exceeds it by `excess`."""
    if se == 0:
        return 0.0 if excess > 0 else 1.0
    return normal_sf(excess / se) if math.isfinite(se) else 1.0


# -------------------------------------------------------------------------------------------- tests


def _loss_check(candidate: EvalSample, ref_loss_sum: np.ndarray, kind: str, threshold: float) -> dict:
    """Primary: improvement = reference loss - candidate loss (nats/prediction), paired per sequence."""
    estimate = paired_ratio_difference(ref_loss_sum, candidate.mlm_loss_sum, candidate.mlm_count)
    p = _z_p(estimate["diff"] - threshold, estimate["se"])  # H0: improvement <= threshold
    return _row(
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


def _accuracy_info(candidate: EvalSample, ref_correct: np.ndarray, kind: str) -> dict:
    """MLM accuracy, shown not gated: the same per-sequence ratio estimator, two-sided p."""
    estimate = paired_ratio_difference(candidate.mlm_correct, ref_correct, candidate.mlm_count)
    p = min(1.0, 2 * _z_p(abs(estimate["diff"]), estimate["se"]))
    return _row(
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


def _paired_regression(
    metric: str, cand: np.ndarray, ref: np.ndarray, kind: str, eps: float, **extra
) -> dict:
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
        p, test = _z_p(-d["diff"] - eps, d["se"]), f"paired z vs margin {eps:g}, {discordant}"
    return _row(
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


def _chance_regression(metric: str, cand: np.ndarray, chance: float, eps: float) -> dict:
    """Secondary against a constant: exact binomial, H1 "accuracy < chance - ε"."""
    n, k = int(cand.size), int(np.count_nonzero(cand))
    p0 = chance - eps
    p = one_sample_proportion_vs(p0, k, n, "less") if p0 > 0 else 1.0
    lo, hi = wilson(k, n)
    acc = k / n if n else 0.0
    return _row(
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


# -------------------------------------------------------------------------------------------- gate


def _require_same_eval_set(candidate: EvalSample, other_count: np.ndarray, other: str) -> None:
    if candidate.mlm_count.sum() <= 0:
        raise UserError("the candidate's eval sample has no masked predictions: nothing to gate on")
    if other_count.size != candidate.n:
        raise UserError(
            f"the candidate has {candidate.n} eval sequences, {other} {other_count.size}: "
            "not the same eval set"
        )
    differ = int(np.count_nonzero(other_count != candidate.mlm_count))
    if differ:
        raise UserError(
            f"mlm_count of the candidate and {other} differ on {differ} sequences: not the same eval set"
        )


def _downstream_pairs(downstream: DownstreamPair | Sequence[DownstreamPair] | None) -> list[DownstreamPair]:
    if downstream is None:
        return []
    if isinstance(downstream, tuple) and len(downstream) == 2 and not isinstance(downstream[0], tuple):
        return [downstream]  # one (candidate, production) pair
    return list(downstream)


def _downstream_row(cand: DownstreamSample, prod: DownstreamSample, eps: float) -> dict:
    """Secondary for one task, H0 "drop <= ε" in the metric's own units (accuracy or F1).

    One seed, accuracy: _paired_regression (exact McNemar, or the paired z against ε). Otherwise
    z = (-(difference) - ε) / se with the two-way (seeds x examples) paired bootstrap's se and
    percentile interval: fine-tuning swings between seeds, and a test over the examples alone would
    call a seed-to-seed difference significant."""
    metric = f"downstream_{cand.metric}"
    if cand.metric == "accuracy" and cand.k == 1:
        return _paired_regression(metric, cand.correct[0], prod.correct[0], "production", eps, task=cand.task)
    d = paired_difference(cand, prod)
    seeds = f"{cand.k} seed{'s' if cand.k > 1 else ''} x {cand.n} examples"
    return _row(
        metric,
        "secondary",
        "production",
        candidate=cand.value,
        reference=prod.value,
        delta=d["difference"],
        ci95=d["ci95"],
        p=_z_p(-d["difference"] - eps, d["se"]),
        test=f"two-way bootstrap z{f' vs margin {eps:g}' if eps else ''}, {seeds}",
        threshold=-eps if eps else 0.0,
        n=cand.n,
        task=cand.task,
    )


def _downstream_checks(pairs: list[DownstreamPair], eps: float, reasons: list[str]) -> list[dict]:
    rows = []
    for cand, prod in pairs:
        if cand is None and prod is None:
            continue
        if cand is None or prod is None:
            present = cand or prod
            missing = "candidate" if cand is None else "production"
            reasons.append(
                f"downstream_{present.metric} ({present.task}): not compared (no result for the {missing})"
            )
            continue
        require_comparable(cand, prod, ("candidate", "production"), same_seeds=True)
        rows.append(_downstream_row(cand, prod, eps))
    return rows


def _primary_reason(row: dict, alpha: float) -> str:
    # Rounded as the decision's tables round them (core.figures), so that a reason and a table agree.
    lo, hi = row["ci95"]
    ci = f"[{signed(lo, 2)}, {signed(hi, 2)}]" if lo is not None and hi is not None else "[unbounded]"
    head = (
        f"mlm_loss {sig(row['candidate'])} vs {vs_label(row['reference_kind'])} {sig(row['reference'])}: "
        f"improvement {signed(row['delta'], 3)} nats {ci}, p={format_p(row['p_value'])}"
    )
    if row["ok"]:
        return f"{head} < {alpha:g}"
    return f"{head} >= {alpha:g}: not significantly more than δ={row['threshold']:g}"


def _secondary_reason(row: dict, alpha: float, correction: str, m: int, eps: float) -> str:
    task = f" ({row['task']})" if "task" in row else ""
    lo, hi = (signed(end, 2) for end in row["ci95"])
    adjusted = f"; {correction_label(correction)}-adjusted over {m} secondaries" if m > 1 else ""
    values = f"{sig(row['candidate'])} vs {vs_label(row['reference_kind'])} {sig(row['reference'])}"
    head = f"{row['metric']}{task} {values}: change {signed(row['delta'], 3)} [{lo}, {hi}]"
    p = f"p={format_p(row['p_value'])}"
    margin = f" beyond ε={eps:g}" if eps else ""
    if row["ok"]:
        return f"{head}, {p} (not a significant regression{margin}{adjusted})"
    return f"{head}, {p} < {alpha:g}: significant regression{margin}{adjusted}"


def decide(
    candidate: EvalSample,
    reference: EvalSample | None = None,
    gate: GateConfig = GateConfig(),
    baselines: Baselines | None = None,
    downstream: DownstreamPair | Sequence[DownstreamPair] | None = None,
    decontaminated: dict[str, bool | None] | None = None,
) -> Decision:
    """Gate a candidate against production (`reference`), or against the trivial baselines when there
    is no production model yet (first promotion).

    decontaminated: per downstream task, whether the candidate's corpus was decontaminated against the
    task's evaluation sets (True), not (False), or unknown (None: no corpus lineage). A task whose
    sets were not kept out is not compared and the candidate is not promoted: the gate would reward
    a model that memorised the test set. An unknown one is compared, and a reason says so.

    downstream: a (candidate, production) pair of DownstreamSample (either may be None), or a list of
    such pairs, one per task; the two sides of a task must have the same metric and fine-tuning seeds.
    A task with one side only is not compared (a reason says so).
    Raises UserError when the inputs are not on the same eval sequences / test examples."""
    if reference is None and baselines is None:
        return Decision(
            False,
            ["no production model and no baselines to beat: nothing to gate against"],
            gate=gate.to_dict(),
        )
    reasons: list[str] = []
    eps = gate.max_regression
    secondary: list[dict] = []
    if reference is not None:
        _require_same_eval_set(candidate, reference.mlm_count, "production")
        primary = _loss_check(candidate, reference.mlm_loss_sum, "production", gate.min_improvement)
        info = [_accuracy_info(candidate, reference.mlm_correct, "production")]
        if "sop_accuracy" in gate.secondary:
            secondary.append(
                _paired_regression(
                    "sop_accuracy", candidate.sop_correct, reference.sop_correct, "production", eps
                )
            )
    else:
        assert baselines is not None
        _require_same_eval_set(candidate, baselines.mlm_count, "the baselines")
        # δ is a margin over production; against a trivial baseline "significantly better" is the bar.
        primary = _loss_check(candidate, baselines.unigram_loss_sum, "baseline:unigram", 0.0)
        info = [_accuracy_info(candidate, baselines.most_frequent_correct, "baseline:most_frequent")]
        if "sop_accuracy" in gate.secondary:
            secondary.append(
                _paired_regression(
                    "sop_accuracy",
                    candidate.sop_correct,
                    baselines.sop_majority_correct,
                    "baseline:majority",
                    eps,
                )
            )
            secondary.append(
                _chance_regression("sop_accuracy", candidate.sop_correct, baselines.sop_chance, eps)
            )

    pairs = _downstream_pairs(downstream)
    refused = refused_tasks([task_of(pair) for pair in pairs], decontaminated or {}, reasons)
    pairs = [pair for pair in pairs if task_of(pair) not in refused]
    if "downstream_accuracy" in gate.secondary:  # the secondary's one name switches every task on
        secondary += _downstream_checks(pairs, eps, reasons)
    elif any(c is not None or p is not None for c, p in pairs):
        reasons.append("downstream_accuracy: not compared (not among the gate's secondary metrics)")

    primary["ok"] = primary["p_value"] < gate.alpha
    # The correction runs over the secondaries actually compared: that is the family whose any-false-
    # veto rate we bound by α (a metric missing on one side is not a test and costs nothing).
    adjusted = CORRECTIONS[gate.correction]([row["p_raw"] for row in secondary])
    for row, p in zip(secondary, adjusted):
        row["p_value"], row["ok"] = p, p >= gate.alpha
    for row in info:
        row["ok"] = None
    checks = [primary, *secondary]
    lines = [_primary_reason(primary, gate.alpha)]
    lines += [_secondary_reason(r, gate.alpha, gate.correction, len(secondary), eps) for r in secondary]
    promote = all(c["ok"] for c in checks) and not refused
    return Decision(promote, lines + reasons, checks, info, gate.to_dict())

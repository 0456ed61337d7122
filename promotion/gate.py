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
- pretraining must pay (promotion/gate_downstream.py): on each downstream task the candidate may not be
  significantly worse than the same architecture from scratch, tuned by the same search; one more
  secondary per task, in the same corrected family, at every promotion. GateConfig.allow_below_scratch
  lets such a candidate through, and the decision's warnings say so.
- a constant SOP head (one label for every sequence) is named in the warnings, not vetoed
  (promotion/degenerate.py; docs/gate.md says why).

Inputs are per-example arrays in the SAME order for every model (index i = eval sequence i, or test
example j of a downstream task; downstream results also with the same fine-tuning seeds). They travel
as JSON (`to_json` / `from_json`), never pickle.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from core.errors import UserError
from promotion.decontamination import refused_tasks, task_of
from promotion.degenerate import sop_constant, sop_constant_warning
from promotion.gate_checks import (
    PRIMARY,
    accuracy_info,
    chance_regression,
    loss_check,
    paired_regression,
)
from promotion.gate_downstream import (
    DownstreamPair,
    below_scratch,
    downstream_pairs,
    production_checks,
    scratch_checks,
)
from promotion.gate_reasons import primary_reason, scratch_warning, secondary_reason
from promotion.samples import Baselines, DownstreamSample, EvalSample
from promotion.stats import bonferroni, holm

SECONDARY = ("sop_accuracy", "downstream_accuracy")
CORRECTIONS = {"bonferroni": bonferroni, "holm": holm}
__all__ = [  # what callers import from here, the samples and the pair type included
    "PRIMARY",
    "SECONDARY",
    "Baselines",
    "Decision",
    "DownstreamPair",
    "DownstreamSample",
    "EvalSample",
    "GateConfig",
    "GateNumberError",
    "decide",
]

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
    allow_below_scratch: bool = False
    """Promote a candidate that is significantly worse than the model from scratch on a downstream
    task (when every other check passes); the decision's warnings then say so. False: refused."""

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
        if not isinstance(self.allow_below_scratch, bool):
            raise UserError(
                f"gate: allow_below_scratch must be true or false, got {self.allow_below_scratch!r}"
            )
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
    "downstream_entity_f1", reference_kind "production" or "scratch") add task; a row against
    scratch that allow_below_scratch let through adds allowed: True; an SOP row of a constant head
    adds constant_predictor (the label it always predicts)."""
    info: list[dict] = field(default_factory=list)
    """Rows shown but not gated (MLM accuracy), in the same form; ok is None."""
    gate: dict = field(default_factory=dict)
    """The GateConfig used."""
    warnings: list[str] = field(default_factory=list)
    """What a reader must not miss, also among the reasons (last): a candidate promoted although
    significantly worse than scratch (allow_below_scratch) or refused for it, a constant SOP head.
    The summaries show these first."""

    def to_dict(self) -> dict:
        return asdict(self)


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


def _sop_checks(
    candidate: EvalSample, reference: EvalSample | None, baselines: Baselines | None, eps: float
) -> list[dict]:
    """SOP against production (paired), or, at a first promotion, against the train-majority baseline
    (paired) and chance (one sample)."""
    if reference is not None:
        return [
            paired_regression("sop_accuracy", candidate.sop_correct, reference.sop_correct, "production", eps)
        ]
    assert baselines is not None
    majority = baselines.sop_majority_correct
    return [
        paired_regression("sop_accuracy", candidate.sop_correct, majority, "baseline:majority", eps),
        chance_regression("sop_accuracy", candidate.sop_correct, baselines.sop_chance, eps),
    ]


def decide(
    candidate: EvalSample,
    reference: EvalSample | None = None,
    gate: GateConfig = GateConfig(),
    baselines: Baselines | None = None,
    downstream: DownstreamPair | Sequence[DownstreamPair] | None = None,
    decontaminated: dict[str, bool | None] | None = None,
    scratch: Mapping[str, DownstreamSample] | None = None,
) -> Decision:
    """Gate a candidate against production (`reference`), or against the trivial baselines when there
    is no production model yet (first promotion).

    decontaminated: per downstream task, whether the candidate's corpus was decontaminated against the
    task's evaluation sets (True), not (False), or unknown (None: no corpus lineage). A task whose
    sets were not kept out is not compared and the candidate is not promoted: the gate would reward
    a model that memorised the test set. An unknown one is compared, and a reason says so.

    downstream: a (candidate, production) pair of DownstreamSample (either may be None), or a list of
    such pairs, one per task; the two sides of a task must have the same metric and fine-tuning seeds.
    A task with one side only is not compared with production (a reason says so, unless there is no
    production model at all).

    scratch: per task, the same architecture fine-tuned from scratch with the candidate's seeds on the
    same examples (its learning rate and warm-up chosen by the same search): the candidate may not be
    significantly worse than it (unless gate.allow_below_scratch), with or without production.

    baselines also tell whether the candidate's SOP head is constant (promotion/degenerate.py).
    Raises UserError when the inputs are not on the same eval sequences / test examples."""
    if reference is None and baselines is None:
        return Decision(
            False,
            ["no production model and no baselines to beat: nothing to gate against"],
            gate=gate.to_dict(),
        )
    reasons: list[str] = []
    eps = gate.max_regression
    if reference is not None:
        _require_same_eval_set(candidate, reference.mlm_count, "production")
        primary = loss_check(candidate, reference.mlm_loss_sum, "production", gate.min_improvement)
        info = [accuracy_info(candidate, reference.mlm_correct, "production")]
    else:
        assert baselines is not None
        _require_same_eval_set(candidate, baselines.mlm_count, "the baselines")
        # δ is a margin over production; against a trivial baseline "significantly better" is the bar.
        primary = loss_check(candidate, baselines.unigram_loss_sum, "baseline:unigram", 0.0)
        info = [accuracy_info(candidate, baselines.most_frequent_correct, "baseline:most_frequent")]
    secondary = _sop_checks(candidate, reference, baselines, eps) if "sop_accuracy" in gate.secondary else []
    constant = sop_constant(candidate, baselines)
    for row in secondary:
        if constant:
            row["constant_predictor"] = constant

    pairs = downstream_pairs(downstream)
    refused = refused_tasks([task_of(pair) for pair in pairs], decontaminated or {}, reasons)
    pairs = [pair for pair in pairs if task_of(pair) not in refused]
    if "downstream_accuracy" in gate.secondary:  # the secondary's one name switches every task on
        secondary += production_checks(pairs, eps, reasons, first=reference is None)
        secondary += scratch_checks(pairs, scratch or {}, eps, reasons)
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
    below = below_scratch(secondary)
    for row in below if gate.allow_below_scratch else []:
        row["allowed"] = True  # a finding, not a veto: the option says so explicitly
    checks = [primary, *secondary]
    promote = all(c["ok"] or c.get("allowed") for c in checks) and not refused
    lines = [primary_reason(primary, gate.alpha)]
    lines += [secondary_reason(r, gate.alpha, gate.correction, len(secondary), eps) for r in secondary]
    warnings = [scratch_warning(below, promote, gate.allow_below_scratch)]
    warnings.append(sop_constant_warning(constant) if constant else None)
    warnings = [w for w in warnings if w]
    return Decision(promote, lines + reasons + warnings, checks, info, gate.to_dict(), warnings)

"""The gate's downstream checks: each task's fine-tuned candidate against production and against the
same architecture trained from scratch, both paired on the same test examples and fine-tuning seeds
(promotion/gate_checks.py downstream_regression; docs/gate.md, "Pretraining must pay").

Why against scratch: the candidate's reason to exist is what pretraining adds to fine-tuning. Before,
a first promotion compared its downstream results with nothing, so a candidate significantly worse
than a model without pretraining was promoted. The scratch model of a task is tuned by the same search
as the candidate (model/finetune.py compare), so the difference is pretraining's, not a recipe's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from promotion.downstream_stats import require_comparable
from promotion.gate_checks import downstream_regression
from promotion.samples import DownstreamSample

DownstreamPair = tuple[DownstreamSample | None, DownstreamSample | None]
"""(candidate, production) results of one downstream task; either side may be missing."""
SCRATCH = "scratch"
"""The reference_kind of a check against the model from scratch."""


def downstream_pairs(downstream: DownstreamPair | Sequence[DownstreamPair] | None) -> list[DownstreamPair]:
    """One (candidate, production) pair, or a list of them, as a list."""
    if downstream is None:
        return []
    if isinstance(downstream, tuple) and len(downstream) == 2 and not isinstance(downstream[0], tuple):
        return [downstream]  # one (candidate, production) pair
    return list(downstream)


def production_checks(pairs: list[DownstreamPair], eps: float, reasons: list[str], first: bool) -> list[dict]:
    """A row per task with both sides; a reason for a task with one side only. `first`: there is no
    production model at all (a first promotion), so a missing production side says nothing."""
    rows = []
    for cand, prod in pairs:
        if cand is None and prod is None:
            continue
        if cand is None or prod is None:
            present = cand or prod
            missing = "candidate" if cand is None else "production"
            if not (first and cand is not None):
                reasons.append(
                    f"downstream_{present.metric} ({present.task}): not compared (no result for the {missing})"
                )
            continue
        require_comparable(cand, prod, ("candidate", "production"), same_seeds=True)
        rows.append(downstream_regression(cand, prod, "production", eps))
    return rows


def scratch_checks(
    pairs: list[DownstreamPair], scratch: Mapping[str, DownstreamSample], eps: float, reasons: list[str]
) -> list[dict]:
    """A row per task whose candidate has a model from scratch beside it (the same seeds and test
    examples): H0 "the candidate is at most ε worse than scratch". A reason for a candidate without
    one (a fine-tuning report from before the scratch samples were kept)."""
    rows = []
    for cand, _ in pairs:
        if cand is None:
            continue
        reference = scratch.get(cand.task)
        if reference is None:
            reasons.append(
                f"downstream_{cand.metric} ({cand.task}): not compared with scratch (no result for the "
                "model from scratch)"
            )
            continue
        require_comparable(cand, reference, ("candidate", "scratch"), same_seeds=True)
        rows.append(downstream_regression(cand, reference, SCRATCH, eps))
    return rows


def below_scratch(rows: list[dict]) -> list[dict]:
    """The checks (after the correction) on which the candidate is significantly worse than scratch."""
    return [r for r in rows if r["reference_kind"] == SCRATCH and r["ok"] is False]

"""The decision's sentences: one reason per check, and the warnings a reader must not miss (a candidate
promoted or refused because of the model from scratch, a constant SOP head). Figures in their one
unit (promotion/units.py): a proportion in percent and its change in percentage points, the loss in
nats, rounded as the decision's tables round them, so that a reason and a table agree.
"""

from __future__ import annotations

from promotion.gate_downstream import SCRATCH
from promotion.gate_report import correction_label, format_p, vs_label
from promotion.units import change, value


def _interval_change(row: dict) -> str:
    lo, hi = row["ci95"]
    if lo is None or hi is None:
        return change(row["metric"], row["delta"]) + " [unbounded]"
    return change(row["metric"], row["delta"], lo, hi)


def _values(row: dict) -> str:
    metric = row["metric"]
    reference = vs_label(row["reference_kind"])
    return f"{value(metric, row['candidate'])} vs {reference} {value(metric, row['reference'])}"


def primary_reason(row: dict, alpha: float) -> str:
    """ "mlm_loss 5.897 nats vs production 5.993 nats: improvement +0.09590 nats [+0.0730, +0.120], p=3e-16 < 0.05"."""
    head = (
        f"{row['metric']} {_values(row)}: improvement {_interval_change(row)}, p={format_p(row['p_value'])}"
    )
    if row["ok"]:
        return f"{head} < {alpha:g}"
    return f"{head} >= {alpha:g}: not significantly more than δ={row['threshold']:g}"


def secondary_reason(row: dict, alpha: float, correction: str, m: int, eps: float) -> str:
    """A secondary check in one sentence: its values, the change with its interval, p, the verdict
    (against scratch: whether allow_below_scratch let it pass)."""
    task = f" ({row['task']})" if "task" in row else ""
    adjusted = f"; {correction_label(correction)}-adjusted over {m} secondaries" if m > 1 else ""
    head = f"{row['metric']}{task} {_values(row)}: change {_interval_change(row)}"
    p = f"p={format_p(row['p_value'])}"
    margin = f" beyond ε={eps:g}" if eps else ""
    if row["ok"]:
        return f"{head}, {p} (not a significant regression{margin}{adjusted})"
    if row["reference_kind"] == SCRATCH:
        verdict = (
            "allowed only because allow_below_scratch"
            if row.get("allowed")
            else "pretraining did not pay here, so the candidate is not promoted (allow_below_scratch would allow it)"
        )
        return f"{head}, {p} < {alpha:g}: significantly worse than the model from scratch{margin}{adjusted}; {verdict}"
    return f"{head}, {p} < {alpha:g}: significant regression{margin}{adjusted}"


def scratch_warning(below: list[dict], promoted: bool, allowed: bool) -> str | None:
    """The line every summary shows when the candidate is significantly worse than scratch on some
    task: promoted anyway (allow_below_scratch), or not promoted for it."""
    if not below:
        return None
    tasks = ", ".join(row.get("task", "?") for row in below)
    if allowed and promoted:
        return f"promoted although significantly worse than scratch on {tasks}, because allow_below_scratch"
    if allowed:
        return f"significantly worse than scratch on {tasks} (allowed by allow_below_scratch; rejected for another reason)"
    return (
        f"not promoted: significantly worse than scratch on {tasks}, so pretraining did not pay there "
        "(allow_below_scratch promotes such a candidate anyway)"
    )

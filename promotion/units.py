"""A gate metric's figures in its one unit, for every text the promotion writes (the decision's reasons
and tables, the eval and downstream artifacts, the summaries): a proportion (accuracy, entity F1, SOP
accuracy, ...) in percent and its change in percentage points, a loss and its change in nats.
core.figures has the rules; this adds the loss's unit to a value, and a threshold as a change.

    value("downstream_entity_f1", 0.1398, 0.117, 0.168) -> "13.98% [11.70, 16.80]"
    value("mlm_loss", 6.2735)                           -> "6.274 nats"
    change("sop_accuracy", -0.04, -0.085, 0.006)        -> "-4.00 pp [-8.50, +0.60]"
    threshold("mlm_loss", 0.05)                         -> "+0.0500 nats"
"""

from __future__ import annotations

from core.figures import is_proportion, metric_change, metric_value


def is_loss(metric: str) -> bool:
    """mlm_loss, sop_loss: a cross-entropy in nats."""
    return metric.split(":")[0].endswith("loss")


def value(metric: str, x: float | None, low: float | None = None, high: float | None = None) -> str:
    """A metric's value (and interval) in its unit; "-" for a missing value."""
    if x is None:
        return "-"
    text = metric_value(metric, x, low, high)
    if is_loss(metric) and not is_proportion(metric):
        head, _, ends = text.partition(" [")
        return f"{head} nats" + (f" [{ends}" if ends else "")
    return text


def change(metric: str, x: float | None, low: float | None = None, high: float | None = None) -> str:
    """A change of a metric (and its interval) in its unit: percentage points, nats."""
    return metric_change(metric, x, low, high)


def threshold(metric: str, x: float | None) -> str:
    """A check's threshold (δ, -ε) as a change: "none" when the row has none, "0" when it is zero."""
    if x is None:
        return "none"
    return "0" if x == 0 else change(metric, x)

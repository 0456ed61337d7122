"""Numbers as people read them in reports and Prefect artifacts: a few significant digits, intervals as
[low, high], thousands separated. One module, so that every artifact writes the same figure the same way
(the raw values stay in the JSON files and results)."""

from __future__ import annotations

import math


def sig(x: float | int | None, digits: int = 4) -> str:
    """`x` to `digits` significant digits, without an exponent for everyday magnitudes:
    7.193497735 -> "7.193", 0.0683024381 -> "0.06830", 635.26978 -> "635.3", 12345.6 -> "12,346";
    an int keeps every digit (12,345); None -> "-"; nan/inf as Python writes them."""
    if x is None:
        return "-"
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int):
        return f"{x:,}"
    if not math.isfinite(x):
        return str(x)
    if x == 0:
        return "0"
    rounded = float(f"{x:.{digits - 1}e}")  # rounded first: 0.99996 is 1.000, not 1.0000
    magnitude = math.floor(math.log10(abs(rounded)))
    if magnitude >= digits - 1:  # as many digits before the point as asked: a whole number, all of it
        return f"{round(x):,}"
    x = rounded
    if magnitude < -4:
        return f"{x:.{digits - 1}e}"
    decimals = digits - 1 - magnitude
    return f"{x:.{decimals}f}"


def signed(x: float | None, digits: int = 4) -> str:
    """sig() with a "+" on a positive value: a change, "+0.0123" ("-" for None)."""
    text = sig(x, digits)
    return "+" + text if x is not None and x > 0 else text


def interval(low: float | None, high: float | None, digits: int = 3) -> str:
    """A confidence interval as "[low, high]" with `digits` significant digits each ("-" for a missing end)."""
    return f"[{sig(low, digits)}, {sig(high, digits)}]"


def value_with_interval(x: float | None, low: float | None, high: float | None, digits: int = 4) -> str:
    """ "0.6875 [0.612, 0.755]": an estimate and its interval in one table cell."""
    if low is None and high is None:
        return sig(x, digits)
    return f"{sig(x, digits)} {interval(low, high, max(digits - 1, 2))}"


# ------------------------------------------------------------------------------- one unit per metric
# A metric that is a proportion (an accuracy, an F1, a precision or recall) is written as a percentage
# everywhere, and a change of it in percentage points ("pp"): 0.1398 entity F1 is "13.98%" in the
# terminal, the model card, every artifact and the summary alone, and a lift is "+1.30 pp". A loss is
# written in its own unit (nats), a change of it likewise.

PROPORTION_SUFFIXES = ("accuracy", "f1", "precision", "recall")


def is_proportion(metric: str) -> bool:
    """accuracy, entity_f1, macro_f1, sop_accuracy, downstream_entity_f1, ...: a proportion in [0, 1]."""
    return metric.split(":")[0].endswith(PROPORTION_SUFFIXES)


def percent(x: float | None, decimals: int = 2) -> str:
    """0.6750 -> "67.50%" ("-" for None)."""
    return "-" if x is None else f"{100 * x:.{decimals}f}%"


def points(x: float | None, decimals: int = 2) -> str:
    """A change of a proportion in percentage points: 0.013 -> "+1.30 pp" ("-" for None)."""
    return "-" if x is None else f"{100 * x:+.{decimals}f} pp"


def _ends(low: float | None, high: float | None, write) -> str:
    return "" if low is None and high is None else f" [{write(low)}, {write(high)}]"


def metric_value(metric: str, x: float | None, low: float | None = None, high: float | None = None) -> str:
    """A metric's value (and its interval) in the metric's unit: "67.50% [65.20, 73.30]" for a
    proportion (the interval's ends in percent too), "7.193 [7.15, 7.24]" otherwise."""
    if is_proportion(metric):
        return percent(x) + _ends(low, high, lambda v: "-" if v is None else f"{100 * v:.2f}")
    return value_with_interval(x, low, high)


def metric_change(metric: str, x: float | None, low: float | None = None, high: float | None = None) -> str:
    """A change of a metric (and its interval): "+1.30 pp [-1.00, +3.90]" for a proportion,
    "+0.1234 nats [+0.10, +0.15]" for a loss (a metric whose name ends in "loss"), else signed digits."""
    if is_proportion(metric):
        return points(x) + _ends(low, high, lambda v: "-" if v is None else f"{100 * v:+.2f}")
    unit = " nats" if metric.endswith("loss") else ""
    return f"{signed(x)}{unit}" + _ends(low, high, lambda v: signed(v, 3))

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

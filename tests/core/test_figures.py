"""core.figures: the numbers every artifact shows."""

from __future__ import annotations

import math

import pytest

from core.figures import interval, sig, value_with_interval


@pytest.mark.parametrize(
    "x, digits, text",
    [
        (7.193497735348039, 4, "7.193"),
        (0.06830243810568773, 4, "0.06830"),
        (635.2697825432106, 4, "635.3"),
        (12345.6, 4, "12,346"),
        (4751, 4, "4,751"),
        (0.5, 4, "0.5000"),
        (-6.27161, 4, "-6.272"),
        (0.0, 4, "0"),
        (None, 4, "-"),
        (1.5e-7, 3, "1.50e-07"),
        (0.99996, 4, "1.000"),
        (True, 4, "True"),
    ],
)
def test_sig(x, digits, text):
    assert sig(x, digits) == text


def test_non_finite_and_intervals():
    assert sig(math.nan) == "nan" and sig(math.inf) == "inf"
    assert interval(0.61234, 0.7551) == "[0.612, 0.755]"
    assert interval(None, 0.5) == "[-, 0.500]"
    assert value_with_interval(0.6875, 0.61234, 0.7551) == "0.6875 [0.612, 0.755]"
    assert value_with_interval(0.6875, None, None) == "0.6875"

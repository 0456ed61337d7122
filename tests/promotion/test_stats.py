"""promotion.stats: every helper against hand-computed or brute-force values, and the intervals' coverage
on simulated paired data with a known true difference (fixed seeds, vectorised where it matters)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from promotion.stats import (
    Z95,
    binom_cdf,
    binom_sf,
    bonferroni,
    holm,
    mcnemar,
    mcnemar_two_sided,
    newcombe_paired_ci,
    normal_cdf,
    normal_sf,
    one_sample_proportion_vs,
    paired_proportion_difference,
    paired_ratio_difference,
    wilson,
)

# ------------------------------------------------------------------------------------------- normal


def test_normal_tails_known_values():
    assert normal_sf(1.96) == pytest.approx(0.0249979, abs=1e-7)
    assert normal_cdf(-1.96) == pytest.approx(0.0249979, abs=1e-7)
    assert normal_cdf(0.0) == 0.5
    assert normal_sf(Z95) == pytest.approx(0.025, abs=1e-12)
    assert normal_cdf(1.0) == pytest.approx(0.8413447461, abs=1e-10)
    assert normal_sf(-math.inf) == 1.0 and normal_sf(math.inf) == 0.0
    # far tail keeps its relative precision (Mills ratio: φ(z)/z · (1 - 1/z² + 3/z⁴))
    z = 30.0
    mills = math.exp(-z * z / 2) / math.sqrt(2 * math.pi) / z * (1 - 1 / z**2 + 3 / z**4)
    assert normal_sf(z) == pytest.approx(mills, rel=1e-5)


def test_wilson_known_values():
    lo, hi = wilson(8, 10)
    assert (lo, hi) == (pytest.approx(0.4902, abs=1e-4), pytest.approx(0.9433, abs=1e-4))
    assert wilson(0, 0) == (0.0, 0.0)
    assert wilson(0, 10)[0] == 0.0 and wilson(10, 10)[1] == pytest.approx(1.0)
    # exact at the ends (the float formula gave 4.34e-19 for 0 of 627, printed as such in eval-metrics)
    assert wilson(0, 627)[0] == 0.0 and wilson(627, 627)[1] == 1.0


# ----------------------------------------------------------------------------------------- binomial


def _exact_sf(k: int, n: int, p: Fraction) -> Fraction:
    return sum((math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(max(k, 0), n + 1)), Fraction(0))


@pytest.mark.parametrize("p", [Fraction(1, 2), Fraction(3, 10), Fraction(1, 20), Fraction(9, 10)])
def test_binomial_tails_match_brute_force(p):
    for n in (0, 1, 2, 7, 12, 25, 40):
        for k in range(-1, n + 2):
            sf = float(_exact_sf(k, n, p))
            cdf = float(1 - _exact_sf(k + 1, n, p))
            assert binom_sf(k, n, float(p)) == pytest.approx(sf, rel=1e-11, abs=1e-300), (k, n, p)
            assert binom_cdf(k, n, float(p)) == pytest.approx(cdf, rel=1e-11, abs=1e-300), (k, n, p)


def test_binomial_tail_far_out_keeps_relative_precision():
    # P(X >= 1500), X ~ Bin(2000, 1/2) ~ 7.4e-116, from exact big integers
    exact = math.exp(math.log(sum(math.comb(2000, i) for i in range(1500, 2001))) - 2000 * math.log(2))
    assert binom_sf(1500, 2000) == pytest.approx(exact, rel=1e-9)
    assert binom_cdf(500, 2000) == pytest.approx(exact, rel=1e-9)


def test_binomial_tail_is_stable_for_a_million_discordant_pairs():
    n = 10**6
    sd = math.sqrt(n) / 2
    for k in (499_000, 500_000, 500_500, 501_000, 502_000):
        # the normal approximation with continuity correction is accurate to ~1e-4 here
        approx = normal_sf((k - 0.5 - n / 2) / sd)
        assert binom_sf(k, n) == pytest.approx(approx, abs=2e-4)
        assert binom_sf(k, n) + binom_cdf(k - 1, n) == pytest.approx(1.0, abs=1e-12)
    assert 0.0 <= binom_sf(600_000, n) < 1e-300  # underflows cleanly, no error
    assert binom_cdf(n, n) == 1.0 and binom_sf(0, n) == 1.0


def test_mcnemar_known_values():
    # b=10, c=2: P(X >= 10), X ~ Bin(12, 1/2) = (66 + 12 + 1) / 4096
    assert mcnemar(10, 2) == pytest.approx(79 / 4096, rel=1e-12)
    assert mcnemar_two_sided(10, 2) == pytest.approx(158 / 4096, rel=1e-12)
    assert mcnemar_two_sided(2, 10) == mcnemar_two_sided(10, 2)
    assert mcnemar(2, 10) == pytest.approx(1 - 13 / 4096, rel=1e-12)  # the other direction: no evidence
    assert mcnemar(0, 0) == 1.0 and mcnemar_two_sided(5, 5) == 1.0
    with pytest.raises(ValueError):
        mcnemar(-1, 3)


def test_one_sample_proportion_against_chance():
    # 40 right of 100 against 0.5: P(X <= 40) by brute force
    less = float(1 - _exact_sf(41, 100, Fraction(1, 2)))
    assert one_sample_proportion_vs(0.5, 40, 100) == pytest.approx(less, rel=1e-11)
    assert one_sample_proportion_vs(0.5, 40, 100, "greater") == pytest.approx(
        float(_exact_sf(40, 100, Fraction(1, 2))), rel=1e-11
    )
    assert one_sample_proportion_vs(0.5, 40, 100, "two-sided") == pytest.approx(2 * less, rel=1e-11)
    assert one_sample_proportion_vs(0.5, 60, 100, "two-sided") == pytest.approx(mcnemar_two_sided(60, 40))
    with pytest.raises(ValueError):
        one_sample_proportion_vs(0.5, 1, 2, "both")


# ------------------------------------------------------------------------------ paired proportions


def _pairs(both: int, b: int, c: int, neither: int) -> tuple[np.ndarray, np.ndarray]:
    a = np.array([1] * both + [1] * b + [0] * c + [0] * neither, dtype=bool)
    bb = np.array([1] * both + [0] * b + [1] * c + [0] * neither, dtype=bool)
    return a, bb


def test_newcombe_paired_interval_published_example():
    # Fagerland, Lydersen & Laake (2017), ch. 8 (Cavo et al. 2012): -0.0621 (95% CI -0.1186 to -0.0046)
    lo, hi = newcombe_paired_ci(59, 6, 16, 80)
    assert lo == pytest.approx(-0.1186, abs=5e-5) and hi == pytest.approx(-0.0046, abs=5e-5)
    d = paired_proportion_difference(*_pairs(59, 6, 16, 80))
    assert (d["b"], d["c"], d["n"]) == (6, 16, 161)
    assert d["diff"] == pytest.approx(-10 / 161)
    assert d["se"] == pytest.approx(math.sqrt(22 - 100 / 161) / 161)
    assert d["ci95"] == pytest.approx([lo, hi])
    w = paired_proportion_difference(*_pairs(59, 6, 16, 80), method="wald")
    assert w["ci95"] == pytest.approx([d["diff"] - Z95 * d["se"], d["diff"] + Z95 * d["se"]])
    assert d["acc_a"] == pytest.approx(65 / 161) and d["acc_b"] == pytest.approx(75 / 161)


def test_paired_proportion_edge_cases():
    same = np.array([True, False, True])
    d = paired_proportion_difference(same, same)
    assert (d["diff"], d["se"], d["b"], d["c"]) == (0.0, 0.0, 0, 0)
    assert d["ci95"][0] <= 0.0 <= d["ci95"][1]
    with pytest.raises(ValueError):
        paired_proportion_difference([True], [True, False])


def test_newcombe_interval_covers_the_true_difference_95_percent():
    rng = np.random.default_rng(1)
    probs = np.array([0.77, 0.08, 0.03, 0.12])  # both right, a only, b only, neither: acc 0.85 vs 0.80
    true = probs[1] - probs[2]
    cells = rng.multinomial(300, probs, size=2000)
    covered = 0
    for both, b, c, neither in cells:
        lo, hi = paired_proportion_difference(*_pairs(both, b, c, neither))["ci95"]
        covered += lo <= true <= hi
    assert 0.93 <= covered / 2000 <= 0.97, covered / 2000


def test_exact_mcnemar_keeps_its_level_under_the_null():
    rng = np.random.default_rng(2)
    discordant = rng.binomial(500, 2 * 0.85 * 0.15, size=2000)  # two independent 85%-accurate models
    b = rng.binomial(discordant, 0.5)
    rejected = np.mean([mcnemar(int(x), int(n - x)) < 0.05 for x, n in zip(b, discordant)])
    assert rejected <= 0.05 + 0.012, rejected  # exact, hence conservative up to the binomial noise


# ------------------------------------------------------------------------------------ paired ratios


def _loss_sums(rng, n: int, true_diff: float, shape=()) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-sequence loss sums of two models: a shared per-sequence difficulty, per-token noise."""
    den = rng.integers(5, 21, size=(*shape, n)).astype(float)
    difficulty = rng.normal(0.0, 1.0, size=(*shape, n))
    a = den * (6.0 + difficulty) + rng.normal(0.0, 0.8, size=den.shape) * np.sqrt(den)
    b = (
        den * (6.0 - true_diff + difficulty)
        + rng.standard_exponential(den.shape) * np.sqrt(den)
        - np.sqrt(den)
    )
    return a, b, den


def test_paired_ratio_difference_hand_computed():
    r = paired_ratio_difference([3.0, 5.0], [1.0, 2.0], [2, 3])
    assert r["diff"] == pytest.approx(1.0) and r["se"] == pytest.approx(0.0)  # d_i = den_i exactly
    r = paired_ratio_difference([4.0, 1.0, 3.0], [1.0, 1.0, 1.0], [2, 1, 1])
    # d = [3, 0, 2], D = 5/4, resid = [0.5, -1.25, 0.75], var = 3/2 · (0.25 + 1.5625 + 0.5625) / 16
    assert r["diff"] == pytest.approx(1.25)
    assert r["se"] == pytest.approx(math.sqrt(1.5 * 2.375 / 16))
    assert r["ratio_a"] == pytest.approx(2.0) and r["ratio_b"] == pytest.approx(0.75)
    assert r["ci95"] == pytest.approx([1.25 - Z95 * r["se"], 1.25 + Z95 * r["se"]])
    assert math.isinf(paired_ratio_difference([1.0], [0.5], [1])["se"])
    with pytest.raises(ValueError):
        paired_ratio_difference([1.0], [1.0], [0])


def test_paired_ratio_se_matches_bootstrap_and_monte_carlo():
    rng = np.random.default_rng(3)
    a, b, den = _loss_sums(rng, 400, 0.05)
    se = paired_ratio_difference(a, b, den)["se"]
    idx = rng.integers(0, 400, size=(4000, 400))  # bootstrap over sequences
    boot = (a[idx] - b[idx]).sum(axis=1) / den[idx].sum(axis=1)
    assert se == pytest.approx(boot.std(ddof=1), rel=0.10)
    # and against the spread of the estimate over independent eval sets of the same design
    a, b, den = _loss_sums(rng, 400, 0.05, shape=(4000,))
    estimates = (a - b).sum(axis=1) / den.sum(axis=1)
    assert se == pytest.approx(estimates.std(ddof=1), rel=0.10)


def test_paired_ratio_interval_covers_the_true_difference_95_percent():
    rng = np.random.default_rng(4)
    true = 0.05
    a, b, den = _loss_sums(rng, 200, true, shape=(2000,))
    covered = 0
    for i in range(2000):
        lo, hi = paired_ratio_difference(a[i], b[i], den[i])["ci95"]
        covered += lo <= true <= hi
    assert 0.93 <= covered / 2000 <= 0.97, covered / 2000


# ---------------------------------------------------------------------------- multiple comparisons


def test_bonferroni_and_holm():
    p = [0.01, 0.04, 0.03]
    assert bonferroni(p) == pytest.approx([0.03, 0.12, 0.09])
    assert holm(p) == pytest.approx([0.03, 0.06, 0.06])
    assert bonferroni([0.6, 0.5]) == [1.0, 1.0]
    assert holm([]) == [] and bonferroni([]) == []
    # the same question "is any hypothesis rejected at α?" for both
    rng = np.random.default_rng(5)
    for _ in range(200):
        ps = list(rng.random(3) ** 3)
        assert (min(bonferroni(ps)) < 0.05) == (min(holm(ps)) < 0.05)

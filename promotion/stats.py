"""Statistics for comparing two models on the same examples: the promotion gate's building blocks.

Pure Python and numpy (no scipy, no torch), so flows and tests can import it anywhere. Every function
states its formula; docs/gate.md says why the gate uses which.

Conventions
- Paired data: index i is the same example (eval sequence, test review) for both models.
- "ci95" is a two-sided 95% interval, a list [lo, hi] of Python floats.
- One-sided p-values are for the alternative named in the docstring; p-values are Python floats.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

Z95 = 1.959963984540054
"""The 97.5% quantile of the standard normal distribution (two-sided 95%)."""

_SQRT2 = math.sqrt(2.0)

# ------------------------------------------------------------------------------------------- normal


def normal_cdf(z: float) -> float:
    """P(Z <= z) for a standard normal Z: Φ(z) = erfc(-z/√2) / 2.

    erfc instead of 1 + erf keeps full relative precision in the lower tail (Φ(-30) ≈ 5e-198)."""
    return 0.5 * math.erfc(-z / _SQRT2)


def normal_sf(z: float) -> float:
    """P(Z >= z) = 1 - Φ(z) = erfc(z/√2) / 2, precise in the upper tail (normal_sf(1.96) ≈ 0.025)."""
    return 0.5 * math.erfc(z / _SQRT2)


# ----------------------------------------------------------------------------------------- binomial


def wilson(successes: float, n: float, z: float = Z95) -> tuple[float, float]:
    """95% Wilson score interval of a binomial proportion (0, 0 for n = 0), as the evaluate and
    finetune reports give it:

        p = k/n,  centre = (p + z²/2n) / (1 + z²/n),
        half = z √(p(1-p)/n + z²/4n²) / (1 + z²/n),  interval = [centre - half, centre + half] ∩ [0, 1]
    """
    if n <= 0:
        return 0.0, 0.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # At k = 0 (k = n) the lower (upper) end is 0 (1) exactly; in floats it came out as 4e-19.
    low = 0.0 if successes <= 0 else max(0.0, centre - half)
    high = 1.0 if successes >= n else min(1.0, centre + half)
    return low, high


def _as_count(x, name: str) -> int:
    if isinstance(x, float | np.floating) and not float(x).is_integer():
        raise ValueError(f"{name} must be a whole number, got {x}")
    return int(x)


def _log_pmf(k: int, n: int, p: float) -> float:
    """log P(X = k), X ~ Bin(n, p), through lgamma (no overflow for any n)."""
    return (
        math.lgamma(n + 1)
        - math.lgamma(k + 1)
        - math.lgamma(n - k + 1)
        + k * math.log(p)
        + (n - k) * math.log1p(-p)
    )


def _tail_from(k: int, n: int, p: float, step: int) -> float:
    """Σ P(X = i) for i = k, k+step, ... (step +1: upper tail, -1: lower tail), for a k on the far side
    of the mode, where the terms only decrease.

    The sum is pmf(k) · Σ_j r_j with r_0 = 1 and the exact term ratios
        pmf(i+1)/pmf(i) = (n-i)/(i+1) · p/q        pmf(i-1)/pmf(i) = i/(n-i+1) · q/p,
    so only pmf(k) goes through lgamma/exp and nothing under- or overflows on the way. The loop stops
    when a term is below 1e-17 of the sum: the rest of a decreasing binomial tail is negligible then.
    It runs O(√(n p q)) terms at most (about 9 standard deviations), ~4,500 for n = 10⁶."""
    q = 1.0 - p
    up, down = p / q, q / p
    total, term, i = 1.0, 1.0, k
    while True:
        if step > 0:
            if i >= n:
                break
            term *= (n - i) / (i + 1) * up
        else:
            if i <= 0:
                break
            term *= i / (n - i + 1) * down
        i += step
        total += term
        if term < total * 1e-17:
            break
    return math.exp(_log_pmf(k, n, p) + math.log(total))


def binom_sf(k: int, n: int, p: float = 0.5) -> float:
    """P(X >= k) for X ~ Bin(n, p), exact (up to float rounding) for any n.

    The tail beyond the mean is summed directly (see _tail_from); a tail that contains the mean is
    1 - the other tail, which is then the small one. Tiny tails keep their relative precision down to
    the smallest double (below that: 0.0)."""
    k, n = _as_count(k, "k"), _as_count(n, "n")
    if n < 0 or not 0.0 <= p <= 1.0:
        raise ValueError(f"binomial with n={n}, p={p}")
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    if p == 0.0:
        return 0.0
    if p == 1.0:
        return 1.0
    if k > n * p:
        return min(1.0, _tail_from(k, n, p, +1))
    return max(0.0, 1.0 - _tail_from(k - 1, n, p, -1))


def binom_cdf(k: int, n: int, p: float = 0.5) -> float:
    """P(X <= k) for X ~ Bin(n, p), exact; the mirror of binom_sf (P(X <= k) = 1 - P(X >= k+1))."""
    k, n = _as_count(k, "k"), _as_count(n, "n")
    if n < 0 or not 0.0 <= p <= 1.0:
        raise ValueError(f"binomial with n={n}, p={p}")
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    if p == 0.0:
        return 1.0
    if p == 1.0:
        return 0.0
    if k < n * p:
        return min(1.0, _tail_from(k, n, p, -1))
    return max(0.0, 1.0 - _tail_from(k + 1, n, p, +1))


def one_sample_proportion_vs(p0: float, successes: int, n: int, alternative: str = "less") -> float:
    """Exact binomial test of an accuracy k/n against a constant p0 (e.g. chance 0.5), X ~ Bin(n, p0):

    - "less"      (H1: p < p0): P(X <= k)
    - "greater"   (H1: p > p0): P(X >= k)
    - "two-sided": min(1, 2 · min(P(X <= k), P(X >= k)))   (the doubled one-sided, "central" p-value)

    The gate asks "is the candidate significantly WORSE than chance?", hence the default "less"."""
    if not 0.0 < p0 < 1.0:
        raise ValueError(f"p0 must be in (0, 1), got {p0}")
    if n <= 0:
        return 1.0
    lower, upper = binom_cdf(successes, n, p0), binom_sf(successes, n, p0)
    if alternative == "less":
        return lower
    if alternative == "greater":
        return upper
    if alternative == "two-sided":
        return min(1.0, 2.0 * min(lower, upper))
    raise ValueError(f"alternative must be 'less', 'greater' or 'two-sided', got {alternative!r}")


def mcnemar(b: int, c: int) -> float:
    """Exact one-sided McNemar test on paired right/wrong outcomes of two models.

    b = examples the first model gets right and the second wrong, c = the reverse. Under H0 (both
    models equally accurate) each of the b + c discordant examples is equally likely to fall either
    way, so b ~ Bin(b + c, 1/2); H1 "the first model is right more often on discordant pairs":
        p = P(X >= b),  X ~ Bin(b + c, 1/2)     (1.0 when there is no discordant pair).
    Examples both get right (or both wrong) say nothing about which is better and drop out."""
    b, c = _as_count(b, "b"), _as_count(c, "c")
    if b < 0 or c < 0:
        raise ValueError(f"McNemar counts must be >= 0, got b={b}, c={c}")
    return binom_sf(b, b + c, 0.5) if b + c else 1.0


def mcnemar_two_sided(b: int, c: int) -> float:
    """Exact two-sided McNemar: p = min(1, 2 · P(X >= max(b, c))), X ~ Bin(b + c, 1/2)."""
    return min(1.0, 2.0 * mcnemar(max(b, c), min(b, c)))


# ------------------------------------------------------------------------------ paired differences


def paired_ratio_difference(num_a, num_b, den) -> dict:
    """Difference of two ratio estimates on the same units, with a cluster (ratio) standard error.

    For units i = 1..n (eval sequences) with per-unit sums num_a[i], num_b[i] of two models (e.g. MLM
    loss summed over the sequence's masked predictions) and the unit's size den[i] (its number of
    predictions):

        diff = Σ num_a / Σ den - Σ num_b / Σ den = Σ d / Σ den,      d_i = num_a[i] - num_b[i]
        var  = n/(n-1) · Σ (d_i - diff · den_i)² / (Σ den)²          (linearised ratio estimator)
        se   = √var,  ci95 = diff ± 1.96 · se

    The units, not the predictions, are treated as independent: masked tokens of one sequence share
    its context and are correlated, so a per-token SE would be too small. Pairing removes the
    per-sequence difficulty both models share. se is inf (ci95 [-inf, inf]) with fewer than 2 units.

    Returns dict(diff, se, ci95, n, ratio_a, ratio_b)."""
    a = np.asarray(num_a, dtype=np.float64).ravel()
    b = np.asarray(num_b, dtype=np.float64).ravel()
    w = np.asarray(den, dtype=np.float64).ravel()
    if not a.shape == b.shape == w.shape:
        raise ValueError(f"paired arrays of different lengths: {a.size}, {b.size}, {w.size}")
    total = float(w.sum())
    if total <= 0:
        raise ValueError("the denominators sum to zero: nothing was measured")
    n = int(a.size)
    d = a - b
    diff = float(d.sum()) / total
    if n < 2:
        se = math.inf
    else:
        resid = d - diff * w
        se = math.sqrt(n / (n - 1) * float(resid @ resid)) / total
    return dict(
        diff=diff,
        se=se,
        ci95=[diff - Z95 * se, diff + Z95 * se],
        n=n,
        ratio_a=float(a.sum()) / total,
        ratio_b=float(b.sum()) / total,
    )


def newcombe_paired_ci(both: int, b: int, c: int, neither: int, z: float = Z95) -> list[float]:
    """Newcombe's (1998) square-and-add interval for p_a - p_b on paired data (his method 10).

    Cells: both right, b = a right & b wrong, c = a wrong & b right, neither; N their sum;
    p_a = (both + b)/N, p_b = (both + c)/N with Wilson intervals [l_a, u_a], [l_b, u_b];
    φ = the correlation of the two outcomes with a continuity correction:
        A = both·neither - b·c;  φ = (A - N/2)/√(marginals) if A > N/2, 0 if 0 <= A <= N/2,
        A/√(marginals) if A < 0, and 0 if a marginal is 0;
        lo = Δ - √((p_a - l_a)² - 2φ(p_a - l_a)(u_b - p_b) + (u_b - p_b)²)
        hi = Δ + √((u_a - p_a)² - 2φ(u_a - p_a)(p_b - l_b) + (p_b - l_b)²),   Δ = (b - c)/N.
    Unlike Wald it stays inside [-1, 1] and keeps its coverage near 95% when b + c is small.
    Known value (Fagerland, Lydersen & Laake 2017, ch. 8): cells (59, 6, 16, 80) -> -0.0621
    [-0.1186, -0.0046]."""
    n = both + b + c + neither
    if n <= 0:
        return [0.0, 0.0]
    pa, pb = (both + b) / n, (both + c) / n
    la, ua = wilson(both + b, n, z)
    lb, ub = wilson(both + c, n, z)
    marginals = (both + b) * (c + neither) * (both + c) * (b + neither)
    phi = 0.0
    if marginals > 0:
        a = both * neither - b * c
        if a > n / 2:
            phi = (a - n / 2) / math.sqrt(marginals)
        elif a < 0:
            phi = a / math.sqrt(marginals)
    delta = (b - c) / n
    lo = delta - math.sqrt(max(0.0, (pa - la) ** 2 - 2 * phi * (pa - la) * (ub - pb) + (ub - pb) ** 2))
    hi = delta + math.sqrt(max(0.0, (ua - pa) ** 2 - 2 * phi * (ua - pa) * (pb - lb) + (pb - lb) ** 2))
    return [max(-1.0, lo), min(1.0, hi)]


def paired_proportion_difference(correct_a, correct_b, method: str = "newcombe") -> dict:
    """Difference of two accuracies measured on the same examples.

    b = #(a right, b wrong), c = #(a wrong, b right), n examples:
        diff = acc_a - acc_b = (b - c)/n
        se   = √(b + c - (b - c)²/n) / n          (Wald SE of the paired difference)
        ci95 = Newcombe's paired score interval (method="newcombe", the default: see
               newcombe_paired_ci) or diff ± 1.96·se (method="wald").
    Returns dict(diff, se, ci95, b, c, n, acc_a, acc_b)."""
    a = np.asarray(correct_a).ravel()
    bb = np.asarray(correct_b).ravel()
    if a.shape != bb.shape:
        raise ValueError(f"paired arrays of different lengths: {a.size}, {bb.size}")
    a, bb = a.astype(bool), bb.astype(bool)
    n = int(a.size)
    if n == 0:
        raise ValueError("no examples to compare")
    both = int(np.count_nonzero(a & bb))
    b = int(np.count_nonzero(a & ~bb))
    c = int(np.count_nonzero(~a & bb))
    diff = (b - c) / n
    se = math.sqrt(max(0.0, b + c - (b - c) ** 2 / n)) / n
    if method == "newcombe":
        ci = newcombe_paired_ci(both, b, c, n - both - b - c)
    elif method == "wald":
        ci = [diff - Z95 * se, diff + Z95 * se]
    else:
        raise ValueError(f"method must be 'newcombe' or 'wald', got {method!r}")
    return dict(diff=diff, se=se, ci95=ci, b=b, c=c, n=n, acc_a=(both + b) / n, acc_b=(both + c) / n)


# ------------------------------------------------------------------- seeds x examples: the bootstrap

Statistic = Callable[[dict[str, np.ndarray], int], np.ndarray]
"""statistic(sums, cells): the metric of R resampled tables from the sums over their cells,
sums[name] float [R], cells = k·n (the number of cells, the same in every replicate)."""

_CELLS_PER_CHUNK = 1 << 21
"""Example weights drawn at a time (replicates x examples): arrays of about 16 MB, whatever R and n."""


def two_way_bootstrap(
    statistic: Statistic,
    tables: dict[str, np.ndarray],
    paired_with: dict[str, np.ndarray] | None = None,
    replicates: int = 2000,
    seed: int = 0,
) -> dict:
    """The "pigeonhole" bootstrap (Owen 2007) of a metric of a (k seeds x n examples) table.

    Why two ways. A fine-tuned model's test score varies for two reasons: the test examples are a
    sample of the task (another 500 reviews give another accuracy), and fine-tuning is random (the
    same checkpoint fine-tuned with another seed swings by points on a few thousand examples). The
    spread of the k per-seed scores alone ignores the examples' share and understates the
    uncertainty; an example bootstrap of the pooled table treats the k fine-tuned models as fixed and
    ignores that a new set of seeds would give other models. Each replicate here resamples the seeds
    with replacement AND, independently, the examples with replacement, and keeps every (seed,
    example) cell of the chosen rows and columns: its variance carries both parts. Owen shows that it
    counts the rest, the seed x example noise (which examples one seed's model gets right), about
    three times, so it is conservative where that dominates, as in accuracy tables; and k = 3 seeds
    estimate the seeds' part from 2 degrees of freedom only (docs/gate.md gives the coverage).

    Vectorised with multiplicity weights: seed weights W [R, k] and example weights V [R, n] count how
    often each seed and example is drawn, and a resampled table's sum is
        sum_r = Σ_k Σ_n W[r,k] · table[k,n] · V[r,n]          (einsum "rk,kn,rn->r"; computed as
                                                               Σ_k W[r,k] · (V @ tableᵀ)[r,k])
    per named table (e.g. "correct", or "true_positives", "false_positives", "false_negatives");
    `statistic` turns the sums into the metric, so entity F1 is computed from summed counts, never as
    a mean of per-example F1s. Replicates are drawn in chunks of at most ~2M example weights, so
    memory stays bounded for any n; a fixed `seed` makes the result reproducible.

    paired_with: the tables of a second model on the SAME examples; each replicate uses the same
    example weights for both, and the same seed weights when both have k seeds (seed i of one paired
    with seed i of the other). A side with k = 1 (a deterministic model, e.g. a linear baseline) is
    broadcast over the other's seeds. The statistic is then statistic(a) - statistic(b). With k = 1 on
    both sides this is the ordinary paired example bootstrap.

    Returns dict(estimate (on the full table), se (sd of the replicates), ci95 (2.5% and 97.5%
    percentiles), replicates (float [R]), k, n)."""
    first = {name: np.asarray(t, dtype=np.float64) for name, t in tables.items()}
    second = {name: np.asarray(t, dtype=np.float64) for name, t in (paired_with or {}).items()}
    shapes = {t.shape for t in [*first.values(), *second.values()]}
    if any(len(shape) != 2 for shape in shapes):
        raise ValueError(f"tables must be 2-D (seeds x examples), got shapes {sorted(shapes)}")
    n = {shape[1] for shape in shapes}
    seeds = {shape[0] for shape in shapes} - {1}
    if len(n) != 1 or len(seeds) > 1:
        raise ValueError(
            f"tables of different shapes {sorted(shapes)} (seed counts may differ only by k = 1)"
        )
    (n,) = n
    k = seeds.pop() if seeds else 1
    if n == 0:
        raise ValueError("no examples to resample")
    if replicates < 2:
        raise ValueError(f"replicates must be at least 2, got {replicates}")
    cells = k * n

    # Every table's rows side by side, [n, rows]: one matrix product per chunk gives every (replicate,
    # table row) sum over the resampled examples.
    names = [
        (side, name, t.shape[0]) for side, named in enumerate((first, second)) for name, t in named.items()
    ]
    stacked = np.ascontiguousarray(np.concatenate([t for t in [*first.values(), *second.values()]]).T)

    def difference(seed_weights: np.ndarray, example_weights: np.ndarray) -> np.ndarray:
        per_row = example_weights @ stacked  # [R, n] @ [n, rows] -> [R, rows]
        sums: tuple[dict, dict] = ({}, {})
        column = 0
        for side, name, rows in names:
            # a k = 1 table is broadcast over the seeds: its one row counts with the total seed weight
            weights = seed_weights if rows == k else seed_weights.sum(1, keepdims=True)
            sums[side][name] = (per_row[:, column : column + rows] * weights).sum(1)
            column += rows
        out = statistic(sums[0], cells)
        return out - statistic(sums[1], cells) if second else out

    estimate = float(difference(np.ones((1, k)), np.ones((1, n)))[0])
    rng = np.random.default_rng(seed)
    chunk = max(1, min(replicates, _CELLS_PER_CHUNK // n))
    draws = []
    for start in range(0, replicates, chunk):
        r = min(chunk, replicates - start)
        seed_weights = _multiplicities(rng, r, k)
        example_weights = _multiplicities(rng, r, n)
        draws.append(difference(seed_weights, example_weights))
    reps = np.concatenate(draws)
    lo, hi = np.quantile(reps, [0.025, 0.975])
    return dict(
        estimate=estimate, se=float(reps.std(ddof=1)), ci95=[float(lo), float(hi)], replicates=reps, k=k, n=n
    )


def _multiplicities(rng: np.random.Generator, rows: int, size: int) -> np.ndarray:
    """float [rows, size]: how often each of `size` items is drawn in `size` draws with replacement,
    per row (a multinomial(size, 1/size) vector per row, through one bincount)."""
    picks = rng.integers(0, size, (rows, size)) + size * np.arange(rows)[:, None]
    return np.bincount(picks.ravel(), minlength=rows * size).reshape(rows, size).astype(np.float64)


# ---------------------------------------------------------------------------- multiple comparisons


def bonferroni(p_values: list[float]) -> list[float]:
    """Bonferroni-adjusted p-values min(1, m·p): rejecting where adjusted p < α keeps the chance of
    any false rejection among the m tests <= α, whatever their dependence."""
    m = len(p_values)
    return [min(1.0, m * p) for p in p_values]


def holm(p_values: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values: sort p ascending, adj_(j) = max_{i<=j} min(1, (m-i+1)·p_(i)).
    Same family-wise guarantee as Bonferroni, never larger; "is ANY hypothesis rejected" is the same
    question for both (the smallest p against α/m)."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted

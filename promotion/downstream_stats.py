"""A downstream task's results over fine-tuning seeds and test examples, in numbers: the metric with its
95% interval, and the paired difference of two models, both from the two-way (seeds x examples)
bootstrap of promotion/stats.py. The fine-tuning report and the gate call these two functions:

summarize(sample: DownstreamSample, replicates=2000, seed=0) -> dict
    "metric":    "accuracy" | "entity_f1" (sample.metric)
    "value":     float, the metric over all k·n (seed, example) cells (F1: of all seeds' entities)
    "ci95":      [lo, hi], two-way bootstrap percentile interval of "value"
    "se":        float, the bootstrap standard error of "value"
    "per_seed":  [float] * k, the metric of each seed's model, in seed order
    "seeds":     [int] * k
    "seed_sd":   float, the sample standard deviation of per_seed (0.0 when k = 1)
    "k", "n":    int, seeds and test examples
    entity_f1 only: "precision", "recall": floats over all cells (TP/(TP+FP), TP/(TP+FN))

paired_difference(a: DownstreamSample, b: DownstreamSample, replicates=2000, seed=0) -> dict
    "metric":     the common metric
    "difference": float, a.value - b.value (+ = a better)
    "ci95":       [lo, hi], two-way paired bootstrap percentile interval of the difference
    "se":         float, its bootstrap standard error
    "k", "n":     int, seeds (the larger side's: a k = 1 side is broadcast over the other's seeds) and
                  examples
    Raises UserError when a and b are not on the same task, metric and number of examples, or when
    both have k > 1 and their seeds differ (seed i of a is paired with seed i of b).

Deterministic: the bootstrap's random generator starts from `seed`, so the same samples give the same
numbers.
"""

from __future__ import annotations

import numpy as np

from core.errors import UserError
from promotion.samples import DownstreamSample, metric_from_sums, precision_recall
from promotion.stats import two_way_bootstrap

REPLICATES = 2000
"""Bootstrap replicates: the percentile interval's ends move by about 0.1 se between seeds at 2000."""


def _statistic(metric: str):
    return lambda sums, cells: metric_from_sums(metric, sums, cells)


def summarize(sample: DownstreamSample, replicates: int = REPLICATES, seed: int = 0) -> dict:
    """The sample's metric over seeds and examples, with its two-way bootstrap interval (see the
    module docstring for the keys)."""
    if sample.n == 0:
        raise UserError(f"downstream results of {sample.task} have no test example")
    boot = two_way_bootstrap(_statistic(sample.metric), sample.tables, replicates=replicates, seed=seed)
    per_seed = sample.per_seed
    out = {
        "metric": sample.metric,
        "value": sample.value,
        "ci95": boot["ci95"],
        "se": boot["se"],
        "per_seed": per_seed,
        "seeds": list(sample.seeds),
        "seed_sd": float(np.std(per_seed, ddof=1)) if sample.k > 1 else 0.0,
        "k": sample.k,
        "n": sample.n,
    }
    if sample.metric == "entity_f1":
        out["precision"], out["recall"] = precision_recall(sample.sums())
    return out


def require_comparable(
    a: DownstreamSample,
    b: DownstreamSample,
    labels: tuple[str, str] = ("a", "b"),
    same_seeds: bool = False,
) -> None:
    """UserError (one line, naming what differs) unless a and b are on the same task, metric and
    test examples and, when both have several seeds (or `same_seeds`), the same seeds."""
    (la, lb) = labels
    if a.task != b.task or a.n != b.n:
        raise UserError(
            "downstream results are not on the same test set: "
            f"{la} {a.task} ({a.n} examples), {lb} {b.task} ({b.n} examples)"
        )
    if a.metric != b.metric:
        raise UserError(
            f"downstream results of {a.task} are not of the same metric: {la} {a.metric}, {lb} {b.metric}"
        )
    if a.seeds != b.seeds and (same_seeds or (a.k > 1 and b.k > 1)):
        raise UserError(
            f"downstream results of {a.task} are not fine-tuned with the same seeds: "
            f"{la} {a.seeds}, {lb} {b.seeds}"
        )


def paired_difference(
    a: DownstreamSample, b: DownstreamSample, replicates: int = REPLICATES, seed: int = 0
) -> dict:
    """a's metric minus b's on the same test examples, paired by example and seed, with the two-way
    bootstrap interval and standard error (see the module docstring for the keys)."""
    require_comparable(a, b)
    if a.n == 0:
        raise UserError(f"downstream results of {a.task} have no test example")
    boot = two_way_bootstrap(_statistic(a.metric), a.tables, b.tables, replicates=replicates, seed=seed)
    return {
        "metric": a.metric,
        "difference": a.value - b.value,
        "ci95": boot["ci95"],
        "se": boot["se"],
        "k": boot["k"],
        "n": boot["n"],
    }

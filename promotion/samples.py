"""Per-example results of a model on fixed data, the inputs of the promotion gate (promotion/gate.py):
the frozen eval set per sequence (EvalSample, written by `albert evaluate`), the trivial baselines on
the same sequences (Baselines), a checkpoint fine-tuned with k seeds per (seed, test example) of a task
(DownstreamSample, written by `albert finetune`; accuracy or entity F1, computed from sums by
metric_from_sums). Index i is the same example for every model, so comparisons can be paired.

They travel as JSON (`to_json` / `from_json`; see docs/gate.md for the format), never pickle.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from typing import Any, ClassVar

import numpy as np

from core.errors import UserError

JSON_VERSION = 1

# ------------------------------------------------------------------------------------ JSON helpers
# Numbers travel as plain JSON lists (floats repr-exact, counts as ints); boolean arrays as a string of
# "0"/"1", one character per example: readable, diffable, ~5x smaller than a list of true/false.


def _bits(a: np.ndarray) -> str:
    return np.where(a, ord("1"), ord("0")).astype(np.uint8).tobytes().decode("ascii")


def _numbers(a: np.ndarray) -> list:
    if a.size and np.all(a == np.round(a)) and np.all(np.abs(a) < 2**53):
        return [int(x) for x in a.astype(np.int64)]
    return a.tolist()


def _bools(value: Any, name: str) -> np.ndarray:
    """A bool vector from a bool/0-1 array, a list, or a "0101" string."""
    if isinstance(value, str):
        raw = np.frombuffer(value.encode("ascii", errors="replace"), dtype=np.uint8)
        if np.any((raw != ord("0")) & (raw != ord("1"))):
            raise UserError(f"{name}: a bit string may hold only '0' and '1'")
        return raw == ord("1")
    a = np.asarray(value)
    if a.ndim != 1:
        raise UserError(f"{name}: expected a 1-D array, got shape {a.shape}")
    if a.dtype != bool:
        if a.size and (not np.issubdtype(a.dtype, np.number) or np.any((a != 0) & (a != 1))):
            raise UserError(f"{name}: expected booleans (or 0/1)")
        a = a.astype(bool)
    return a


def _nonnegative(value: Any, name: str) -> np.ndarray:
    try:
        a = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise UserError(f"{name}: expected numbers ({err})") from None
    if a.ndim != 1:
        raise UserError(f"{name}: expected a 1-D array, got shape {a.shape}")
    if not np.all(np.isfinite(a)) or np.any(a < 0):
        raise UserError(f"{name}: expected finite numbers >= 0")
    return a


def _same_length(owner: str, arrays: dict[str, np.ndarray]) -> None:
    lengths = {name: a.size for name, a in arrays.items()}
    if len(set(lengths.values())) > 1:
        raise UserError(f"{owner}: arrays of different lengths {lengths}")


def _load(data: dict | str | bytes, kind: str, versions: tuple[int, ...] = (JSON_VERSION,)) -> dict:
    """The JSON object of a `kind` sample in one of the `versions` this code reads (no "version": the
    newest)."""
    if isinstance(data, str | bytes):
        data = json.loads(data)
    if not isinstance(data, dict):
        raise UserError(f"{kind}: expected a JSON object")
    if data.get("kind", kind) != kind:
        raise UserError(f"expected a {kind!r} JSON object, got kind {data.get('kind')!r}")
    if data.get("version", versions[-1]) not in versions:
        readable = ", ".join(str(v) for v in versions)
        raise UserError(f"{kind}: JSON version {data.get('version')} (this code reads {readable})")
    return data


def _get(data: dict, key: str, kind: str) -> Any:
    if key not in data:
        raise UserError(f"{kind}: the JSON has no {key!r}")
    return data[key]


class _Arrays:
    """Equality by value for dataclasses of numpy arrays (the generated __eq__ would compare arrays
    element-wise and fail)."""

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(
            np.array_equal(getattr(self, f.name), getattr(other, f.name))
            if isinstance(getattr(self, f.name), np.ndarray)
            else getattr(self, f.name) == getattr(other, f.name)
            for f in fields(self)  # type: ignore[arg-type]
        )

    __hash__ = None  # type: ignore[assignment]


# ------------------------------------------------------------------------------------------ inputs


@dataclass(eq=False)
class EvalSample(_Arrays):
    """One model on the frozen eval set; index i = eval sequence i, the same order for every model.

    JSON: {"kind": "albert-eval-sample", "version": 1, "n": N, "mlm_loss_sum": [floats],
           "mlm_count": [ints], "mlm_correct": [ints], "sop_correct": "0110..."}"""

    mlm_loss_sum: np.ndarray
    """float [n]: sum over the sequence's real masked predictions of the cross-entropy (nats)."""
    mlm_count: np.ndarray
    """[n]: number of real masked predictions of the sequence (the same for every model)."""
    mlm_correct: np.ndarray
    """[n]: correct (argmax) masked predictions of the sequence."""
    sop_correct: np.ndarray
    """bool [n]: the sentence-order prediction was right."""

    KIND: ClassVar[str] = "albert-eval-sample"

    def __post_init__(self):
        self.mlm_loss_sum = _nonnegative(self.mlm_loss_sum, "mlm_loss_sum")
        self.mlm_count = _nonnegative(self.mlm_count, "mlm_count")
        self.mlm_correct = _nonnegative(self.mlm_correct, "mlm_correct")
        self.sop_correct = _bools(self.sop_correct, "sop_correct")
        _same_length("EvalSample", vars(self))
        if np.any(self.mlm_correct > self.mlm_count):
            raise UserError("EvalSample: mlm_correct exceeds mlm_count on some sequence")

    @property
    def n(self) -> int:
        return int(self.mlm_count.size)

    @property
    def mlm_loss(self) -> float:
        """Held-out MLM loss: mean cross-entropy over all real predictions (nats)."""
        return float(self.mlm_loss_sum.sum() / self.mlm_count.sum())

    @property
    def sop_accuracy(self) -> float:
        return float(self.sop_correct.mean()) if self.n else 0.0

    def to_json(self) -> dict:
        return {
            "kind": self.KIND,
            "version": JSON_VERSION,
            "n": self.n,
            "mlm_loss_sum": self.mlm_loss_sum.tolist(),
            "mlm_count": _numbers(self.mlm_count),
            "mlm_correct": _numbers(self.mlm_correct),
            "sop_correct": _bits(self.sop_correct),
        }

    @classmethod
    def from_json(cls, data: dict | str | bytes) -> EvalSample:
        payload = _load(data, cls.KIND)
        return cls(*(_get(payload, f.name, cls.KIND) for f in fields(cls)))


@dataclass(eq=False)
class Baselines(_Arrays):
    """Trivial baselines on the same frozen eval set (first promotion, no production model yet).

    JSON: {"kind": "albert-gate-baselines", "version": 1, "n": N, "unigram_loss_sum": [floats],
           "mlm_count": [ints], "most_frequent_correct": [ints], "sop_majority_correct": "0101...",
           "sop_chance": 0.5}"""

    unigram_loss_sum: np.ndarray
    """float [n]: cross-entropy of the train-label unigram distribution on each sequence's labels."""
    mlm_count: np.ndarray
    """[n]: the sequences' real predictions; must equal the candidate's mlm_count."""
    most_frequent_correct: np.ndarray
    """[n]: correct predictions of "always the most frequent train label"."""
    sop_majority_correct: np.ndarray
    """bool [n]: "always the train-majority SOP label" was right."""
    sop_chance: float = 0.5

    KIND: ClassVar[str] = "albert-gate-baselines"

    def __post_init__(self):
        self.unigram_loss_sum = _nonnegative(self.unigram_loss_sum, "unigram_loss_sum")
        self.mlm_count = _nonnegative(self.mlm_count, "mlm_count")
        self.most_frequent_correct = _nonnegative(self.most_frequent_correct, "most_frequent_correct")
        self.sop_majority_correct = _bools(self.sop_majority_correct, "sop_majority_correct")
        arrays = {k: v for k, v in vars(self).items() if isinstance(v, np.ndarray)}
        _same_length("Baselines", arrays)
        if not 0.0 < float(self.sop_chance) < 1.0:
            raise UserError(f"Baselines: sop_chance must be in (0, 1), got {self.sop_chance}")
        self.sop_chance = float(self.sop_chance)

    @property
    def n(self) -> int:
        return int(self.mlm_count.size)

    def to_json(self) -> dict:
        return {
            "kind": self.KIND,
            "version": JSON_VERSION,
            "n": self.n,
            "unigram_loss_sum": self.unigram_loss_sum.tolist(),
            "mlm_count": _numbers(self.mlm_count),
            "most_frequent_correct": _numbers(self.most_frequent_correct),
            "sop_majority_correct": _bits(self.sop_majority_correct),
            "sop_chance": self.sop_chance,
        }

    @classmethod
    def from_json(cls, data: dict | str | bytes) -> Baselines:
        payload = _load(data, cls.KIND)
        names = [f.name for f in fields(cls)]
        return cls(
            *(_get(payload, k, cls.KIND) for k in names[:-1]), sop_chance=payload.get("sop_chance", 0.5)
        )


# ----------------------------------------------------------------------------- downstream samples

METRICS: dict[str, tuple[str, ...]] = {
    "accuracy": ("correct",),
    "entity_f1": ("true_positives", "false_positives", "false_negatives"),
}
"""A downstream metric -> the per-(seed, example) tables it is computed from (by their sums)."""
DOWNSTREAM_JSON_VERSION = 2
"""Version 2 holds k seeds (version 1, one seed and right/wrong only, still reads)."""


def _ratio(numerator, denominator):
    """numerator / denominator elementwise, 0 where the denominator is 0 (floats or arrays)."""
    numerator, denominator = np.broadcast_arrays(
        np.asarray(numerator, np.float64), np.asarray(denominator, np.float64)
    )
    return np.divide(numerator, denominator, out=np.zeros(numerator.shape), where=denominator > 0)


def metric_from_sums(metric: str, sums: dict[str, np.ndarray], cells: int) -> np.ndarray:
    """The metric of a set of (seed, example) cells from the sums of its tables over the cells:
    accuracy = Σ correct / cells; entity F1 = 2·TP / (2·TP + FP + FN) (0 when that is 0), i.e. the
    micro F1 of all entities, never a mean of per-example F1s. Works on scalars and on [R] arrays of
    bootstrap replicates (promotion.stats.two_way_bootstrap's statistic)."""
    if metric == "accuracy":
        return _ratio(sums["correct"], cells)
    tp, fp, fn = (sums[name] for name in METRICS["entity_f1"])
    return _ratio(2 * np.asarray(tp), 2 * np.asarray(tp) + fp + fn)


def precision_recall(sums: dict[str, np.ndarray]) -> tuple[float, float]:
    """Entity precision TP / (TP + FP) and recall TP / (TP + FN) from summed counts (0 for 0/0)."""
    tp, fp, fn = (sums[name] for name in METRICS["entity_f1"])
    return float(_ratio(tp, tp + fp)), float(_ratio(tp, tp + fn))


def _bool_table(value: Any, name: str) -> np.ndarray:
    """bool [k, n] from one seed's bits (a "0101" string or a 1-D array: k = 1), a list of bit
    strings (one per seed), or a 2-D bool/0-1 array."""
    if (
        isinstance(value, list | tuple)
        and value
        and all(isinstance(row, str | list | tuple) for row in value)
    ):
        rows = [_bools(row, name) for row in value]  # one bit string or list per seed
    elif isinstance(value, str) or np.ndim(value) == 1:
        rows = [_bools(value, name)]
    elif np.ndim(value) == 2:
        rows = [_bools(row, name) for row in np.asarray(value)]
    else:
        raise UserError(f"{name}: expected one row per seed (seeds x examples), got shape {np.shape(value)}")
    if len({row.size for row in rows}) > 1:
        raise UserError(f"{name}: the seeds' rows have different lengths {[row.size for row in rows]}")
    return np.stack(rows) if rows else np.zeros((0, 0), dtype=bool)


def _count_table(value: Any, name: str) -> np.ndarray:
    """int64 [k, n] of counts >= 0 from a 2-D array or a list of per-seed lists (1-D: k = 1)."""
    try:
        a = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise UserError(f"{name}: expected whole numbers >= 0 per seed and example ({err})") from None
    a = a[None] if a.ndim == 1 else a
    if a.ndim != 2:
        raise UserError(f"{name}: expected one row per seed (seeds x examples), got shape {a.shape}")
    if not np.all(np.isfinite(a)) or np.any(a < 0) or np.any(a != np.round(a)):
        raise UserError(f"{name}: expected whole numbers >= 0")
    return a.astype(np.int64)


@dataclass(eq=False)
class DownstreamSample(_Arrays):
    """Fine-tuned models of one checkpoint on a task's test examples, one per fine-tuning seed; row i
    = seed seeds[i], column j = test example j, the same order for every model. The tables are those
    of METRICS[metric]: "correct" (bool [k, n]) for accuracy; "true_positives", "false_positives",
    "false_negatives" (int [k, n], entity counts of example j) for entity_f1. The other fields are
    None. A 1-D table (or one bit string) is one seed. `from_scores` builds one from per-seed score
    dicts.

    JSON (version 2; the seeds' rows as bit strings, counts as int lists):
        {"kind": "albert-downstream-sample", "version": 2, "task": "...", "metric": "accuracy",
         "n": N, "k": K, "seeds": [0, 1, 2], "correct": ["0101...", "1101...", "0111..."]}
        {..., "metric": "entity_f1", ..., "true_positives": [[2, 0, ...], ...],
         "false_positives": [[...], ...], "false_negatives": [[...], ...]}
    Version 1 ({"task", "n", "correct": "0101..."}: one seed, accuracy) reads as k = 1, seeds [0]."""

    task: str
    correct: np.ndarray | None = None
    """bool [k, n]: the prediction of seed i's model on test example j was right (accuracy)."""
    metric: str = "accuracy"
    seeds: list[int] | None = None
    """The k fine-tuning seeds, distinct (None: 0..k-1)."""
    true_positives: np.ndarray | None = None
    """int [k, n]: predicted entities of example j whose span and type are gold (entity_f1)."""
    false_positives: np.ndarray | None = None
    """int [k, n]: predicted entities that are not gold."""
    false_negatives: np.ndarray | None = None
    """int [k, n]: gold entities not predicted."""

    KIND: ClassVar[str] = "albert-downstream-sample"

    def __post_init__(self):
        if not isinstance(self.task, str) or not self.task:
            raise UserError("DownstreamSample: task must be a non-empty string")
        if self.metric not in METRICS:
            raise UserError(f"DownstreamSample: unknown metric {self.metric!r}; known: {list(METRICS)}")
        needed = METRICS[self.metric]
        for name in needed:
            if getattr(self, name) is None:
                raise UserError(f"DownstreamSample: metric {self.metric} needs {name!r}")
        for names in METRICS.values():
            for name in set(names) - set(needed):
                if getattr(self, name) is not None:
                    raise UserError(f"DownstreamSample: {name!r} does not belong to metric {self.metric}")
        for name in needed:
            table = getattr(self, name)
            setattr(self, name, _bool_table(table, name) if name == "correct" else _count_table(table, name))
        shapes = {name: getattr(self, name).shape for name in needed}
        if len(set(shapes.values())) > 1:
            raise UserError(f"DownstreamSample: tables of different shapes {shapes}")
        if self.k == 0:
            raise UserError("DownstreamSample: no seed (a table needs one row per seed)")
        seeds = list(range(self.k)) if self.seeds is None else self.seeds
        if not all(isinstance(s, int | np.integer) and not isinstance(s, bool) for s in seeds):
            raise UserError(f"DownstreamSample: seeds must be integers, got {seeds!r}")
        if len(seeds) != self.k:
            raise UserError(f"DownstreamSample: {len(seeds)} seeds for {self.k} rows of results")
        if len(set(seeds)) != len(seeds):
            raise UserError(f"DownstreamSample: duplicate seeds {sorted(seeds)}")
        self.seeds = [int(s) for s in seeds]

    @classmethod
    def from_scores(
        cls, task: str, metric: str, seeds: list[int], scores: list[dict[str, np.ndarray]]
    ) -> DownstreamSample:
        """One sample from the per-example score dicts of k models, one per seed, in seed order:
        {"correct": bool [n]} (accuracy) or {"true_positives", "false_positives", "false_negatives":
        int [n]} (entity_f1)."""
        if metric not in METRICS:
            raise UserError(f"DownstreamSample: unknown metric {metric!r}; known: {list(METRICS)}")
        missing = [name for score in scores for name in METRICS[metric] if name not in score]
        if missing:
            raise UserError(f"DownstreamSample: the scores of metric {metric} lack {sorted(set(missing))}")
        lengths = {np.size(score[name]) for score in scores for name in METRICS[metric]}
        if len(lengths) > 1:
            raise UserError(f"DownstreamSample: per-example scores of different lengths {sorted(lengths)}")
        tables = {name: np.stack([np.asarray(score[name]) for score in scores]) for name in METRICS[metric]}
        return cls(task, metric=metric, seeds=list(seeds), **tables)

    @property
    def tables(self) -> dict[str, np.ndarray]:
        """The metric's tables by name, [k, n] each."""
        return {name: getattr(self, name) for name in METRICS[self.metric]}

    @property
    def k(self) -> int:
        return int(next(iter(self.tables.values())).shape[0])

    @property
    def n(self) -> int:
        return int(next(iter(self.tables.values())).shape[1])

    def sums(self, seed_index: int | None = None) -> dict[str, int]:
        """Each table summed over all cells, or over one seed's row."""
        rows = slice(None) if seed_index is None else slice(seed_index, seed_index + 1)
        return {name: int(table[rows].sum()) for name, table in self.tables.items()}

    @property
    def value(self) -> float:
        """The metric over all k·n cells (accuracy: the mean over seeds; F1: of all seeds' entities)."""
        return float(metric_from_sums(self.metric, self.sums(), self.k * self.n))

    @property
    def per_seed(self) -> list[float]:
        """The metric of each seed's model, in seed order."""
        return [float(metric_from_sums(self.metric, self.sums(i), self.n)) for i in range(self.k)]

    def to_json(self) -> dict:
        out = {
            "kind": self.KIND,
            "version": DOWNSTREAM_JSON_VERSION,
            "task": self.task,
            "metric": self.metric,
            "n": self.n,
            "k": self.k,
            "seeds": list(self.seeds),
        }
        for name, table in self.tables.items():
            out[name] = [_bits(row) if name == "correct" else _numbers(row) for row in table]
        return out

    @classmethod
    def from_json(cls, data: dict | str | bytes) -> DownstreamSample:
        payload = _load(data, cls.KIND, versions=(1, DOWNSTREAM_JSON_VERSION))
        metric = payload.get("metric", "accuracy")
        if metric not in METRICS:
            raise UserError(f"DownstreamSample: unknown metric {metric!r}; known: {list(METRICS)}")
        tables = {name: _get(payload, name, cls.KIND) for name in METRICS[metric]}
        return cls(_get(payload, "task", cls.KIND), metric=metric, seeds=payload.get("seeds"), **tables)

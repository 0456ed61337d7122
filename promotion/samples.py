"""Per-example results of a model on fixed data, the inputs of the promotion gate (promotion/gate.py):
the frozen eval set per sequence (EvalSample, written by `albert evaluate`), the trivial baselines on
the same sequences (Baselines), a fine-tuned model per test example (DownstreamSample, written by
`albert finetune`). Index i is the same example for every model, so comparisons can be paired.

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


def _load(data: dict | str | bytes, kind: str) -> dict:
    if isinstance(data, str | bytes):
        data = json.loads(data)
    if not isinstance(data, dict):
        raise UserError(f"{kind}: expected a JSON object")
    if data.get("kind", kind) != kind:
        raise UserError(f"expected a {kind!r} JSON object, got kind {data.get('kind')!r}")
    if data.get("version", JSON_VERSION) != JSON_VERSION:
        raise UserError(f"{kind}: JSON version {data.get('version')} (this code reads {JSON_VERSION})")
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


@dataclass(eq=False)
class DownstreamSample(_Arrays):
    """One fine-tuned model on a task's test examples; index j = test example j, the same order for
    every model.

    JSON: {"kind": "albert-downstream-sample", "version": 1, "task": "...", "n": M, "correct": "0101..."}"""

    task: str
    correct: np.ndarray
    """bool [m]: the prediction on test example j was right."""

    KIND: ClassVar[str] = "albert-downstream-sample"

    def __post_init__(self):
        if not isinstance(self.task, str) or not self.task:
            raise UserError("DownstreamSample: task must be a non-empty string")
        self.correct = _bools(self.correct, "correct")

    @property
    def n(self) -> int:
        return int(self.correct.size)

    @property
    def accuracy(self) -> float:
        return float(self.correct.mean()) if self.n else 0.0

    def to_json(self) -> dict:
        return {
            "kind": self.KIND,
            "version": JSON_VERSION,
            "task": self.task,
            "n": self.n,
            "correct": _bits(self.correct),
        }

    @classmethod
    def from_json(cls, data: dict | str | bytes) -> DownstreamSample:
        payload = _load(data, cls.KIND)
        return cls(_get(payload, "task", cls.KIND), _get(payload, "correct", cls.KIND))

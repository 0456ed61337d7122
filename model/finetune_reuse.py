"""The from-scratch model's tuning, kept and reused (`albert finetune --scratch-cache DIR`).

The scratch model of a fine-tuning report is the same architecture trained from random weights by the
same search as the pretrained model (model/finetune.py). Its result depends on the task's examples,
the recipe, the architecture, the vocabulary (through the encoding), the seeds, the device kind and the
code; not on the pretrained weights. A re-pretraining that keeps its vocabulary (every run after the
first continues from production's) therefore tunes the very same scratch model again every time: in
the weekly rehearsal that is a third of the fine-tuning, and at production scale hours.

With a cache folder the command keys the scratch tuning by exactly those inputs (`scratch_key`), reads
it back when that key is there, and otherwise tunes it and writes it (one JSON file, written whole).
The report says which: `scratch_cache` = {"path", "reused"}. A file that cannot be read, or that was
written for other inputs, is named in a warning and replaced by a fresh tuning: a cache never decides a
result on its own."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, is_dataclass

import numpy as np

from core import storage
from model.finetune_tasks import ModelRun, Tuned

FORMAT = 1
"""The cache file's format; part of the key, so that a change of it never reads an old file."""


def run_to_json(run: ModelRun) -> dict:
    """A ModelRun as JSON (its per-example arrays as lists with their dtype: read back bit for bit)."""
    scores = {
        split: {key: {"dtype": str(a.dtype), "values": a.tolist()} for key, a in arrays.items()}
        for split, arrays in run.scores.items()
    }
    return {"seed": run.seed, "training": run.training, "scores": scores, "metrics": run.metrics}


def run_from_json(data: dict) -> ModelRun:
    scores = {
        split: {key: np.array(a["values"], dtype=a["dtype"]) for key, a in arrays.items()}
        for split, arrays in data["scores"].items()
    }
    return ModelRun(data["seed"], data["training"], scores, data["metrics"])


def tuned_to_json(tuned: Tuned) -> dict:
    """A Tuned (model/finetune_tasks.py) as JSON: the grid, the search on the first seed, the chosen setting and
    the other seeds' runs (runs[0] is search[chosen], not stored twice)."""
    return {
        "grid": [list(setting) for setting in tuned.grid],
        "chosen": tuned.chosen,
        "search": [run_to_json(run) for run in tuned.search],
        "runs": [run_to_json(run) for run in tuned.runs[1:]],
    }


def tuned_from_json(data: dict) -> Tuned:
    search = [run_from_json(run) for run in data["search"]]
    grid = [tuple(setting) for setting in data["grid"]]
    others = [run_from_json(run) for run in data["runs"]]
    return Tuned(grid, search, data["chosen"], [search[data["chosen"]], *others])


def _digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def code_digest() -> str:
    """The model package's source, which trains, encodes and scores the scratch model: any change to it
    is another key (a fix to the training loop must not be hidden by a result kept before it)."""
    folder = os.path.dirname(os.path.abspath(__file__))
    h = hashlib.sha256()
    for root, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(n for n in names if n.endswith(".py")):
            path = os.path.join(root, name)
            h.update(os.path.relpath(path, folder).encode() + b"\0")
            with open(path, "rb") as f:
                h.update(f.read())
    return h.hexdigest()


def scratch_inputs(task, model, cfg, seeds: list[int]) -> dict:
    """Everything the scratch model's tuning depends on, as JSON-able values (digests for the large
    ones). `task`: a model.finetune_tasks task; `model`: model.finetune.PretrainedModel (its config,
    vocabulary and device: never its weights); `cfg`: the FinetuneConfig."""
    import torch

    config = asdict(model.config) if is_dataclass(model.config) else vars(model.config)
    return {
        "format": FORMAT,
        "task": task.name,
        "kind": type(task).__name__,
        "head": getattr(task, "head", None),
        "labels": list(task.labels),
        "sizes": task.sizes,
        "examples": _digest(repr(task.examples)),
        "vocabulary": storage.sha256(model.spm_path),
        "architecture": config,
        "recipe": {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(cfg).items()},
        "seeds": list(seeds),
        "device": getattr(model.device, "type", str(model.device)),
        "torch": torch.__version__,
        "code": code_digest(),
    }


def scratch_file(cache: str, inputs: dict) -> str:
    """The cache file of these inputs: one per task and key."""
    return storage.join(cache, f"{inputs['task']}-{_digest(inputs)[:16]}.json")


def load_scratch(cache: str, inputs: dict, log=print) -> Tuned | None:
    """The kept Tuned of these inputs, or None (not kept yet, or unreadable: named in a warning)."""
    path = scratch_file(cache, inputs)
    if not storage.exists(path):
        return None
    try:
        data = storage.read_json(path)
        if data.get("inputs") != json.loads(json.dumps(inputs, default=str)):
            raise ValueError("it was written for other inputs")
        return tuned_from_json(data["tuned"])
    except (ValueError, KeyError, TypeError, IndexError, OSError) as e:
        log(f"WARNING: the kept scratch tuning {path} cannot be used ({e}); tuning the scratch model again")
        return None


def save_scratch(cache: str, inputs: dict, tuned: Tuned) -> str:
    """Keep the Tuned of these inputs (written whole); returns its path."""
    path = scratch_file(cache, inputs)
    storage.write_json(path, {"inputs": inputs, "tuned": tuned_to_json(tuned)}, indent=None)
    return path

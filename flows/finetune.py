"""Downstream fine-tuning for the gate and the demo: `albert finetune` (model/finetune.py) on a
checkpoint, from scratch for the lift, on candidate and production for the gate's downstream check."""

from __future__ import annotations

import importlib.util


def finetune_available() -> bool:
    return importlib.util.find_spec("model.finetune") is not None


def downstream_accuracy(
    candidate: str, production: str | None, task: str, storage_root: str, extra_args: list[str]
) -> dict:
    raise NotImplementedError("waiting for model/finetune.py")

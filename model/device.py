"""Which device a command runs on: one resolution for pretraining, evaluation and fine-tuning."""

from __future__ import annotations

import torch

from pipelines.core.errors import UserError


def resolve_device(name: str) -> torch.device:
    """auto = cuda if available, else cpu; cpu, cuda, cuda:N, tpu (model/tpu.py, torch_xla)."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "tpu":
        from model.tpu import xla_device

        return xla_device()
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise UserError(f"--device {name}: no CUDA device is available")
    return torch.device(name)

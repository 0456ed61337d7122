"""Which device a command runs on: one resolution for pretraining, evaluation and fine-tuning."""

from __future__ import annotations

import os

import torch

from core.errors import UserError


def resolve_device(name: str) -> torch.device:
    """auto = cuda if available, else XLA where PJRT_DEVICE names its runtime (a TPU host: the TPU
    pool's jobs set PJRT_DEVICE=TPU, infra/prefect.yaml), else cpu; cpu, cuda, cuda:N, tpu
    (model/tpu.py, torch_xla)."""
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        return resolve_device("tpu") if os.environ.get("PJRT_DEVICE") else torch.device("cpu")
    if name == "tpu":
        from model.tpu import xla_device

        return xla_device()
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise UserError(f"--device {name}: no CUDA device is available")
    return torch.device(name)


def make_deterministic() -> None:
    """Kernels that give the same bits on every run, for this process (before its first CUDA matmul).

    On an H100 in bf16, two runs of the same command otherwise end in different weights, and so does a
    resumed run: cuDNN's attention backward and atomic-add reductions differ run to run. With this, two
    runs and a run resumed from its step-100 checkpoint ended byte-identical (model and optimizer, ALBERT
    base, 300 steps at length 512), at about 1.8x the step time (docs/gpu.md). An op with no
    deterministic kernel raises instead of running one that is not."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # cuBLAS: fixed reduction workspaces
    torch.use_deterministic_algorithms(True)
    # Attention by flash (deterministic backward under the flag) or the math kernel: cuDNN's and the
    # memory-efficient kernel's backward are not deterministic.
    torch.backends.cuda.enable_cudnn_sdp(False)
    torch.backends.cuda.enable_mem_efficient_sdp(False)


def to_device(model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """`model.to(device)`, its tied parameters still tied (the MLM decoder's weight IS the word
    embedding). On XLA, `.to()` makes every parameter a new Parameter (an XLA tensor cannot take a CPU
    tensor's place in place), so a parameter reachable under two names became two: the model trained
    untied and its optimizer state had keys no CPU model has. The aliases are set again after the move."""
    from model.convert import tied_aliases

    aliases = tied_aliases(model)
    model.to(device)
    for alias, canonical in aliases.items():
        owner, _, name = alias.rpartition(".")
        setattr(model.get_submodule(owner), name, model.get_parameter(canonical))
    return model


def manual_seed(device: torch.device, seed: int) -> None:
    """torch.manual_seed, and on XLA the device's own generator too (torch's does not reach it: every
    XLA run would draw the same dropout masks whatever --seed)."""
    torch.manual_seed(seed)
    if device.type == "xla":
        from model.tpu import set_rng_state

        set_rng_state(seed)

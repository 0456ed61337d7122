"""The stateful parts of a pretraining run, each with `state_dict()` / `load_state_dict(state)`, so a
checkpoint is one dict of them (model.checkpoint.save_state / Loaded.state) and a resume restores it:

    "model"      ModelState      {parameter name: tensor}: full (unsharded) weights, tied tensors once
    "optimizer"  OptimizerState  {"tensors": {"<param>::<slot>": tensor}, "json": groups and scalars}
    "schedule"   optim.Schedule  {"peak", "warmup", "total", "power"}
    "progress"   Progress        {"step", "counters"}
    "data"       DataPosition    this rank's model.data.Position
    "rng"        RNGState        this rank's {"json": Python and NumPy states, "tensors": torch's}

Model and optimizer state are gathered with torch.distributed.checkpoint.state_dict, which works for
a plain module, DDP's module and FSDP2 (fully_shard) alike: state_dict() is collective under FSDP2
(call it on every rank) and complete on rank 0 only.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn

from model.convert import CheckpointError, tied_aliases
from model.tpu import rng_state, set_rng_state


def _full_state_options():
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(full_state_dict=True, cpu_offload=True)


class ModelState:
    def __init__(self, model: nn.Module):
        self.model = model

    def state_dict(self) -> dict[str, torch.Tensor]:
        from torch.distributed.checkpoint.state_dict import get_model_state_dict

        state = get_model_state_dict(self.model, options=_full_state_options())
        aliases = tied_aliases(self.model)
        return {k: v.detach().cpu().contiguous() for k, v in state.items() if k not in aliases}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """A full state dict (tied tensors once) into a plain or FSDP2 model, strictly."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

        state = dict(state)
        for alias, canonical in tied_aliases(self.model).items():
            if canonical in state:
                state[alias] = state[canonical]
        set_model_state_dict(self.model, state, options=StateDictOptions(full_state_dict=True, strict=True))


class OptimizerState:
    """The optimizer's full state keyed by parameter names: tensors apart, the rest as JSON (no pickle)."""

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer):
        self.model, self.optimizer = model, optimizer

    def state_dict(self) -> dict:
        from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

        osd = get_optimizer_state_dict(self.model, self.optimizer, options=_full_state_options())
        if not osd:  # with a process group, only rank 0 receives the full state (cpu_offload)
            return {"tensors": {}, "json": {}}
        tensors, scalars = {}, {}
        for name, slots in osd["state"].items():
            for slot, value in slots.items():
                if isinstance(value, torch.Tensor):
                    tensors[f"{name}::{slot}"] = value.detach().cpu().contiguous()
                else:
                    scalars.setdefault(name, {})[slot] = value
        groups = [
            {k: (list(v) if isinstance(v, tuple) else v) for k, v in g.items()} for g in osd["param_groups"]
        ]
        return {
            "tensors": tensors,
            "json": {"param_groups": groups, "scalars": scalars, "class": type(self.optimizer).__name__},
        }

    def load_state_dict(self, state: dict) -> None:
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

        meta = state["json"]
        if meta.get("class") != type(self.optimizer).__name__:
            raise CheckpointError(
                f"checkpoint optimizer is {meta.get('class')}, this run uses {type(self.optimizer).__name__}"
            )
        slots: dict[str, dict] = {}
        for key, value in state["tensors"].items():
            name, slot = key.rsplit("::", 1)
            slots.setdefault(name, {})[slot] = value
        for name, scalars in meta.get("scalars", {}).items():
            slots.setdefault(name, {}).update(scalars)
        groups = [{k: (tuple(v) if k == "betas" else v) for k, v in g.items()} for g in meta["param_groups"]]
        set_optimizer_state_dict(
            self.model,
            self.optimizer,
            {"state": slots, "param_groups": groups},
            options=StateDictOptions(full_state_dict=True),
        )


class RNGState:
    """This process's random number generators: Python's, NumPy's, torch's CPU (and CUDA) one, and XLA's
    where torch_xla is loaded."""

    def state_dict(self) -> dict:
        py = random.getstate()
        np_state = np.random.get_state()
        tensors = {"torch_cpu": torch.get_rng_state()}
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            tensors["torch_cuda"] = torch.cuda.get_rng_state()
        numpy = [np_state[0], np_state[1].tolist(), int(np_state[2]), int(np_state[3]), float(np_state[4])]
        saved = {"python": [py[0], list(py[1]), py[2]], "numpy": numpy}
        if (xla := rng_state()) is not None:  # XLA's generator (dropout on the device): model/tpu.py
            saved["xla"] = xla
        return {"json": saved, "tensors": tensors}

    def load_state_dict(self, state: dict) -> None:
        py, n, tensors = state["json"]["python"], state["json"]["numpy"], state["tensors"]
        random.setstate((py[0], tuple(py[1]), py[2]))
        np.random.set_state((n[0], np.array(n[1], dtype=np.uint32), n[2], n[3], n[4]))
        torch.set_rng_state(tensors["torch_cpu"])
        if "torch_cuda" in tensors and torch.cuda.is_available():
            torch.cuda.set_rng_state(tensors["torch_cuda"])
        if "xla" in state["json"] and rng_state() is not None:
            set_rng_state(state["json"]["xla"])


class DataPosition:
    """Where this rank's instance stream is: the model.data.Position after the last batch taken
    (None before the first); the stream restarts from it exactly."""

    def __init__(self):
        self.position = None

    def state_dict(self) -> dict:
        return self.position.to_dict()

    def load_state_dict(self, state: dict) -> None:
        from model.data import Position

        self.position = Position.from_dict(state)


@dataclass
class Progress:
    """The optimizer steps done and the run's counters (over all ranks, resumed segments included)."""

    step: int = 0
    skipped_steps: int = 0
    tokens: int = 0
    sequences: int = 0
    train_seconds: float = 0.0

    def counters(self) -> dict:
        return {
            "skipped_steps": self.skipped_steps,
            "tokens": self.tokens,
            "sequences": self.sequences,
            "train_seconds": self.train_seconds,
        }

    def count(self, m: dict) -> None:
        """One step's metrics (Trainer.train_step) into the counters."""
        self.tokens += int(m["tokens"])
        self.sequences += int(m["sequences"])
        self.skipped_steps += int(not m["finite"])

    def state_dict(self) -> dict:
        return {"step": self.step, "counters": self.counters()}

    def load_state_dict(self, state: dict) -> None:
        self.step = state["step"]
        for name in self.counters():
            setattr(self, name, state["counters"].get(name, getattr(self, name)))

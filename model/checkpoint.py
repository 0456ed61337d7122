"""Training checkpoints: `runs/<id>/checkpoints/step-N/`, complete or absent, verified on load.

A checkpoint folder holds

    config.json, model.safetensors, spm.model   the model (model.convert.load_pretrained reads it as is)
    optimizer.safetensors + optimizer.json     optimizer state tensors / hyper-parameters and the
                                               parameter names they belong to (no pickle anywhere)
    rng.safetensors                            torch CPU (and CUDA) generator state of every rank
    trainer.json                               step, schedule, counters, training config, and per rank:
                                               data position, Python and NumPy RNG state
    checksums.json                             sha256 of every file above, written LAST

It is written with pipelines.core.storage.write_folder: locally into a hidden temporary folder next to its
final place, renamed when complete; on an object store (gs://, s3://), which has no folder rename, the
files in place and checksums.json last. A folder without checksums.json is never taken for a
checkpoint. `latest` returns the newest folder whose checksums verify; a corrupt or partial one
is reported and skipped. The last `keep` checkpoints are kept.

Model and optimizer state are gathered as full (unsharded) state dicts with
torch.distributed.checkpoint.state_dict, which works for a plain module, DDP's module and FSDP2
(fully_shard) alike; only rank 0 writes.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn

from model.convert import (
    CHECKSUMS_NAME,
    CONFIG_NAME,
    SPM_NAME,
    TRAINER_NAME,
    WEIGHTS_NAME,
    CheckpointError,
    checksums_json,
    digest,
    read_checksums,
    tied_aliases,
    verify_file,
)
from pipelines.core import storage

log = logging.getLogger(__name__)

CHECKSUMS = CHECKSUMS_NAME
TRAINER = TRAINER_NAME
OPTIMIZER_TENSORS = "optimizer.safetensors"
OPTIMIZER_JSON = "optimizer.json"
RNG = "rng.safetensors"
_STEP_DIR = re.compile(r"^step-(\d+)$")


# ---------------------------------------------------------------------------------------------------
# State gathering


def _full_state_options():
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(full_state_dict=True, cpu_offload=True)


def model_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """Full state dict (collective under FSDP2; call on every rank; empty on ranks other than 0 of a
    process group), each tied tensor once."""
    from torch.distributed.checkpoint.state_dict import get_model_state_dict

    state = get_model_state_dict(model, options=_full_state_options())
    aliases = tied_aliases(model)
    return {k: v.detach().cpu().contiguous() for k, v in state.items() if k not in aliases}


def optimizer_state(model: nn.Module, optimizer: torch.optim.Optimizer) -> tuple[dict, dict]:
    """(tensors, json) of the full optimizer state keyed by parameter names (collective under FSDP2;
    empty on ranks other than 0)."""
    from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

    osd = get_optimizer_state_dict(model, optimizer, options=_full_state_options())
    if not osd:  # with a process group, only rank 0 receives the full state (cpu_offload)
        return {}, {}
    tensors, scalars = {}, {}
    for name, slots in osd["state"].items():
        for slot, value in slots.items():
            if isinstance(value, torch.Tensor):
                tensors[f"{name}::{slot}"] = value.detach().cpu().contiguous()
            else:
                scalars.setdefault(name, {})[slot] = value
    groups = []
    for g in osd["param_groups"]:
        groups.append({k: (list(v) if isinstance(v, tuple) else v) for k, v in g.items()})
    return tensors, {"param_groups": groups, "scalars": scalars, "class": type(optimizer).__name__}


def load_optimizer_state(
    model: nn.Module, optimizer: torch.optim.Optimizer, tensors: dict, meta: dict
) -> None:
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

    if meta.get("class") != type(optimizer).__name__:
        raise CheckpointError(
            f"checkpoint optimizer is {meta.get('class')}, this run uses {type(optimizer).__name__}"
        )
    state: dict[str, dict] = {}
    for key, value in tensors.items():
        name, slot = key.rsplit("::", 1)
        state.setdefault(name, {})[slot] = value
    for name, slots in meta.get("scalars", {}).items():
        state.setdefault(name, {}).update(slots)
    groups = []
    for g in meta["param_groups"]:
        groups.append({k: (tuple(v) if k == "betas" else v) for k, v in g.items()})
    set_optimizer_state_dict(
        model,
        optimizer,
        {"state": state, "param_groups": groups},
        options=StateDictOptions(full_state_dict=True),
    )


def load_model_state(model: nn.Module, state: dict[str, torch.Tensor]) -> None:
    """Load a full state dict (tied tensors once) into a plain or FSDP2 model, strictly."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

    state = dict(state)
    for alias, canonical in tied_aliases(model).items():
        if canonical in state:
            state[alias] = state[canonical]
    set_model_state_dict(model, state, options=StateDictOptions(full_state_dict=True, strict=True))


def rng_state() -> dict:
    """This process's RNG states: (json part, tensor part)."""
    py = __import__("random").getstate()
    np_state = np.random.get_state()
    tensors = {"torch_cpu": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        tensors["torch_cuda"] = torch.cuda.get_rng_state()
    return {
        "json": {
            "python": [py[0], list(py[1]), py[2]],
            "numpy": [
                np_state[0],
                np_state[1].tolist(),
                int(np_state[2]),
                int(np_state[3]),
                float(np_state[4]),
            ],
        },
        "tensors": tensors,
    }


def set_rng_state(state_json: dict, tensors: dict[str, torch.Tensor]) -> None:
    import random

    py = state_json["python"]
    random.setstate((py[0], tuple(py[1]), py[2]))
    n = state_json["numpy"]
    np.random.set_state((n[0], np.array(n[1], dtype=np.uint32), n[2], n[3], n[4]))
    torch.set_rng_state(tensors["torch_cpu"])
    if "torch_cuda" in tensors and torch.cuda.is_available():
        torch.cuda.set_rng_state(tensors["torch_cuda"])


# ---------------------------------------------------------------------------------------------------
# Save / find / load


def checkpoints_dir(run_dir: str) -> str:
    return storage.join(run_dir, "checkpoints")


def step_dir(run_dir: str, step: int) -> str:
    return storage.join(checkpoints_dir(run_dir), f"step-{step}")


def save(
    run_dir: str,
    step: int,
    *,
    config_json: dict,
    model_tensors: dict[str, torch.Tensor],
    optimizer_tensors: dict[str, torch.Tensor],
    optimizer_json: dict,
    trainer_json: dict,
    rng_tensors: dict[str, torch.Tensor],
    spm_model: str | None = None,
    keep: int = 3,
) -> str:
    """Write step-N atomically (rank 0 only) and prune to the last `keep`. Returns the folder."""
    from safetensors.torch import save as st_save

    bad = [k for k, v in model_tensors.items() if v.is_floating_point() and not torch.isfinite(v).all()]
    if bad:
        raise CheckpointError(f"refusing to write a checkpoint with non-finite weights: {', '.join(bad[:5])}")
    files: dict[str, bytes] = {
        CONFIG_NAME: (json.dumps(config_json, indent=2, sort_keys=True) + "\n").encode(),
        WEIGHTS_NAME: st_save(model_tensors, metadata={"format": "pt"}),
        OPTIMIZER_TENSORS: st_save(optimizer_tensors),
        OPTIMIZER_JSON: (json.dumps(optimizer_json, indent=1) + "\n").encode(),
        RNG: st_save(rng_tensors),
        TRAINER: (json.dumps(trainer_json, indent=1) + "\n").encode(),
    }
    if spm_model:
        files[SPM_NAME] = storage.read_bytes(spm_model)
    final = step_dir(run_dir, step)
    summary = checksums_json({name: digest(data) for name, data in files.items()}, step=step)
    storage.write_folder(final, {**files, CHECKSUMS: summary}, marker=CHECKSUMS)
    prune(run_dir, keep)
    return final


def list_steps(run_dir: str) -> list[int]:
    """Steps of the checkpoint folders that look complete (have checksums.json), ascending."""
    root = checkpoints_dir(run_dir)
    steps = []
    for name in storage.subdirs(root):
        m = _STEP_DIR.match(name)
        if m and storage.exists(storage.join(root, name, CHECKSUMS)):
            steps.append(int(m.group(1)))
    return sorted(steps)


def prune(run_dir: str, keep: int) -> None:
    """Keep the newest `keep` complete checkpoints; remove older ones and stale temporary folders."""
    root = checkpoints_dir(run_dir)
    steps = list_steps(run_dir)
    for s in steps[: max(0, len(steps) - keep)]:
        storage.remove(step_dir(run_dir, s), recursive=True)
    for name in storage.subdirs(root):
        if name.startswith(".step-") and ".tmp-" in name:
            storage.remove(storage.join(root, name), recursive=True)


def verify(path: str) -> dict[str, str]:
    """Check every file of a training checkpoint (optimizer and RNG state too: what a resume reads)
    against checksums.json. Returns {name: sha256}; CheckpointError otherwise."""
    files = read_checksums(path)
    if files is None:
        raise CheckpointError(f"{path} is not a complete checkpoint: {CHECKSUMS} is missing")
    for name in files:
        verify_file(path, name, files)
    return files


def latest(run_dir: str) -> str | None:
    """The newest checkpoint of a run that verifies, or None. Corrupt ones are logged and skipped."""
    for s in reversed(list_steps(run_dir)):
        path = step_dir(run_dir, s)
        try:
            verify(path)
            return path
        except CheckpointError as err:
            log.warning("skipping checkpoint: %s", err)
    return None


def resolve(path: str) -> str:
    """A checkpoint folder as given; a run folder (no config.json, a checkpoints/ folder) -> its newest
    checkpoint that verifies. So `albert evaluate --checkpoint runs/r1` reads the run's last state."""
    if storage.exists(storage.join(path, CONFIG_NAME)) or not storage.isdir(checkpoints_dir(path)):
        return path
    found = latest(path)
    if found is None:
        count = len(list_steps(path))
        why = f"none of its {count} checkpoints verifies" if count else "it has no complete checkpoint yet"
        raise CheckpointError(f"{path} is a run folder without a valid checkpoint ({why})")
    return found


@dataclass
class Loaded:
    path: str
    trainer: dict
    model_tensors: dict[str, torch.Tensor]
    optimizer_tensors: dict[str, torch.Tensor]
    optimizer_json: dict
    rng_tensors: dict[str, torch.Tensor]


def load(path: str) -> Loaded:
    """Read (after verifying) everything a resumed run needs from a checkpoint folder."""
    from safetensors.torch import load as st_load

    verify(path)

    def read(name: str) -> bytes:
        return storage.read_bytes(storage.join(path, name))

    return Loaded(
        path=path,
        trainer=json.loads(read(TRAINER)),
        model_tensors=st_load(read(WEIGHTS_NAME)),
        optimizer_tensors=st_load(read(OPTIMIZER_TENSORS)),
        optimizer_json=json.loads(read(OPTIMIZER_JSON)),
        rng_tensors=st_load(read(RNG)),
    )

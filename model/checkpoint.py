"""Training checkpoints: `runs/<id>/checkpoints/step-N/`, complete or absent, verified on load.

A checkpoint folder holds

    config.json, model.safetensors, spm.model   the model (model.convert.load_pretrained reads it as is)
    optimizer.safetensors + optimizer.json     optimizer state tensors / hyper-parameters and the
                                               parameter names they belong to (no pickle anywhere)
    rng.safetensors                            torch CPU (and CUDA) generator state of every rank
    trainer.json                               step, schedule, counters, training config, and per rank:
                                               data position, Python and NumPy RNG state
    checksums.json                             sha256 of every file above, written LAST

`save_state` writes a run's state dict (model/train_state.py: one `state_dict()` per stateful part)
into these files, and `Loaded.state(rank)` gives the same dict back, for one rank.

It is written with core.storage.staged_folder: locally into a hidden temporary folder next to
its final place, renamed when complete; on an object store (gs://, s3://), which has no folder rename,
staged in a local temporary folder, then uploaded file by file, checksums.json last. Tensors are
written straight to their files and loaded from them (model.checksums): a checkpoint is never held
in memory as bytes. A folder without checksums.json is never taken for a
checkpoint. `latest` returns the newest folder whose checksums verify; a corrupt or partial one
is reported and skipped. The last `keep` checkpoints are kept.

Model and optimizer state are full (unsharded) state dicts; only rank 0 writes.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from functools import partial

import torch

from core import oserrors, storage

# Where a run keeps its checkpoints (torch-free, so that pipelines find them too).
from core.run_folders import checkpoints_dir, is_run_folder, list_steps, step_dir
from model.checksums import Content, read_tensors, write_local
from model.convert import (
    CHECKSUMS_NAME,
    CONFIG_NAME,
    SPM_NAME,
    TRAINER_NAME,
    WEIGHTS_NAME,
    CheckpointError,
    checksums_json,
    read_checksums,
    verify_file,
)

log = logging.getLogger(__name__)

CHECKSUMS = CHECKSUMS_NAME
TRAINER = TRAINER_NAME
OPTIMIZER_TENSORS = "optimizer.safetensors"
OPTIMIZER_JSON = "optimizer.json"
RNG = "rng.safetensors"


# ---------------------------------------------------------------------------------------------------
# Save / find / load


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
    """Write step-N atomically (rank 0 only) and prune to the last `keep`. Returns the folder.
    Tensors go straight to their files (safetensors save_file), never through one bytes object."""
    from safetensors.torch import save_file

    bad = [k for k, v in model_tensors.items() if v.is_floating_point() and not torch.isfinite(v).all()]
    if bad:
        raise CheckpointError(f"refusing to write a checkpoint with non-finite weights: {', '.join(bad[:5])}")
    files: dict[str, Content] = {  # in this order in checksums.json
        CONFIG_NAME: (json.dumps(config_json, indent=2, sort_keys=True) + "\n").encode(),
        WEIGHTS_NAME: partial(save_file, model_tensors, metadata={"format": "pt"}),
        OPTIMIZER_TENSORS: partial(save_file, optimizer_tensors),
        OPTIMIZER_JSON: (json.dumps(optimizer_json, indent=1) + "\n").encode(),
        RNG: partial(save_file, rng_tensors),
        TRAINER: (json.dumps(trainer_json, indent=1) + "\n").encode(),
    }
    if spm_model:
        files[SPM_NAME] = partial(storage.copy, spm_model)
    final = step_dir(run_dir, step)
    try:
        with storage.staged_folder(final, marker=CHECKSUMS) as tmp:
            sums = {name: write_local(os.path.join(tmp, name), content) for name, content in files.items()}
            write_local(os.path.join(tmp, CHECKSUMS), checksums_json(sums, step=step))
    except Exception as err:
        # A full disk, ...: staged_folder removed what was written; the error names the checkpoint,
        # not its temporary folder, and is an OSError also when safetensors raised it (in Rust's words).
        found = oserrors.find(err)
        if found is None:
            raise
        if found.filename is not None and ".tmp-" in os.fsdecode(found.filename):
            found.filename = None
        oserrors.named(found, final)
        if found is err:
            raise
        raise found from None
    prune(run_dir, keep)
    return final


def save_state(
    run_dir: str,
    state: dict,
    ranks: list[dict],
    *,
    config_json: dict,
    about: dict,
    spm_model: str | None = None,
    keep: int = 3,
) -> str:
    """Write a run's state dict as step-N (`save`). `state`: the parts shared by all ranks ("model",
    "optimizer", "schedule", "progress"); `ranks`: every rank's own parts ({"data", "rng"}, in rank
    order); `about`: what trainer.json records beside them ("train_config", "data")."""
    step = state["progress"]["step"]
    trainer_json = {
        "step": step,
        "world_size": len(ranks),
        "schedule": state["schedule"],
        "counters": state["progress"]["counters"],
        **about,
        "ranks": [
            {"rank": r, "data": mine["data"], "rng": mine["rng"]["json"]} for r, mine in enumerate(ranks)
        ],
    }
    return save(
        run_dir,
        step,
        config_json=config_json,
        model_tensors=state["model"],
        optimizer_tensors=state["optimizer"]["tensors"],
        optimizer_json=state["optimizer"]["json"],
        trainer_json=trainer_json,
        rng_tensors={
            f"{k}@{r}": v for r, mine in enumerate(ranks) for k, v in mine["rng"]["tensors"].items()
        },
        spm_model=spm_model,
        keep=keep,
    )


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
    return verify_listed(path)


def verify_listed(path: str, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """`verify`, but for the files in `skip` (which the caller verifies as it reads them); the table
    must list them all the same."""
    files = read_checksums(path)
    if files is None:
        raise CheckpointError(f"{path} is not a complete checkpoint: {CHECKSUMS} is missing")
    for name in skip:
        if name not in files:
            raise CheckpointError(f"{storage.join(path, name)} has no recorded sha256 to verify it by")
    for name in files:
        if name not in skip:
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
    if not is_run_folder(path):
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

    def state(self, rank: int) -> dict:
        """The state dict `save_state` wrote, with rank `rank`'s own parts."""
        mine = self.trainer["ranks"][rank]
        return {
            "model": self.model_tensors,
            "optimizer": {"tensors": self.optimizer_tensors, "json": self.optimizer_json},
            "schedule": self.trainer["schedule"],
            "progress": {"step": self.trainer["step"], "counters": self.trainer["counters"]},
            "data": mine["data"],
            "rng": {
                "json": mine["rng"],
                "tensors": {
                    k.split("@")[0]: v for k, v in self.rng_tensors.items() if k.endswith(f"@{rank}")
                },
            },
        }


def load(path: str) -> Loaded:
    """Read (after verifying) everything a resumed run needs from a checkpoint folder. The tensor
    files are hashed and loaded from disk (model.checksums.read_tensors), not read into memory first."""
    files = verify_listed(path, skip=(WEIGHTS_NAME, OPTIMIZER_TENSORS, RNG))

    def read(name: str) -> bytes:
        return storage.read_bytes(storage.join(path, name))

    return Loaded(
        path=path,
        trainer=json.loads(read(TRAINER)),
        model_tensors=read_tensors(path, WEIGHTS_NAME, files),
        optimizer_tensors=read_tensors(path, OPTIMIZER_TENSORS, files),
        optimizer_json=json.loads(read(OPTIMIZER_JSON)),
        rng_tensors=read_tensors(path, RNG, files),
    )

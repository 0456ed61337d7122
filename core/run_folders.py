"""Where a training run keeps its checkpoints, without torch, so that every layer can find them:

    RUN/checkpoints/step-N/      one folder per saved step, complete once its checksums.json is there
                                 (written last)

A folder given as a checkpoint is either one checkpoint (it has config.json) or a run folder (it has
checkpoints/ instead); every command that takes a checkpoint takes a run folder for its newest one.
model/checkpoint.py writes, verifies and loads checkpoints; `albert tokenize --checkpoint RUN` reads the
vocabulary of the newest with this module alone.
"""

from __future__ import annotations

import re

from core import storage

CHECKSUMS = "checksums.json"  # model/checksums.py's CHECKSUMS_NAME: a checkpoint's last file
CONFIG = "config.json"  # a checkpoint's model config: a folder with it is a checkpoint, not a run
_STEP_DIR = re.compile(r"^step-(\d+)$")


def checkpoints_dir(run_dir: str) -> str:
    return storage.join(run_dir, "checkpoints")


def step_dir(run_dir: str, step: int) -> str:
    return storage.join(checkpoints_dir(run_dir), f"step-{step}")


def list_steps(run_dir: str) -> list[int]:
    """Steps of the checkpoint folders that look complete (have checksums.json), ascending."""
    root = checkpoints_dir(run_dir)
    steps = []
    for name in storage.subdirs(root):
        match = _STEP_DIR.match(name)
        if match and storage.exists(storage.join(root, name, CHECKSUMS)):
            steps.append(int(match.group(1)))
    return sorted(steps)


def is_run_folder(path: str) -> bool:
    """A run folder (checkpoints/ and no config.json of its own), not a checkpoint."""
    return not storage.exists(storage.join(path, CONFIG)) and storage.isdir(checkpoints_dir(path))

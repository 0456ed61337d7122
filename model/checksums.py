"""Checksummed folders: every folder this project writes (training checkpoints, `albert import`,
`albert export`) lists its files' sha256 in checksums.json, written last, and every load verifies the
files it reads against it. A registry version (flows/registry.py) is a copy of config.json,
model.safetensors and spm.model whose lineage.json records the same table: it is verified the same
way. A folder with trainer.json but no checksums.json is a training checkpoint whose write did not
finish, and is refused.
"""

from __future__ import annotations

import hashlib
import json

from pipelines.core import storage
from pipelines.core.errors import UserError

CHECKSUMS_NAME = "checksums.json"
TRAINER_NAME = "trainer.json"  # only a training checkpoint (model.checkpoint) has it
LINEAGE_NAME = "lineage.json"  # a registry version's (flows/registry.py): its files' sha256 under "files"


class CheckpointError(UserError):
    """A checkpoint that is missing, incomplete, damaged or fails its checksums."""


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def checksums_json(sums: dict[str, str], **fields) -> bytes:
    """checksums.json content: {file name: sha256}, and `fields` beside it (a checkpoint's step)."""
    return (json.dumps({**fields, "files": sums}, indent=1) + "\n").encode()


def read_checksums(folder: str) -> dict[str, str] | None:
    """{file name: sha256} from the folder's checksums.json (a registry version: its lineage.json);
    None for a foreign folder (neither there). CheckpointError for a damaged table, or a training
    checkpoint without one (its write did not finish: checksums.json comes last)."""
    path = storage.join(folder, CHECKSUMS_NAME)
    if not storage.exists(path):
        if storage.exists(storage.join(folder, TRAINER_NAME)):
            raise CheckpointError(
                f"{folder} is an unfinished checkpoint: it has {TRAINER_NAME} but no {CHECKSUMS_NAME} "
                f"(written last); use an earlier checkpoint of the run"
            )
        path = storage.join(folder, LINEAGE_NAME)
        if not storage.exists(path):
            return None
    try:
        files = storage.read_json(path)["files"]
        valid = isinstance(files, dict) and all(isinstance(v, str) for v in files.values())
    except (ValueError, KeyError, TypeError):  # not JSON, not UTF-8, no files table
        valid = False
    if not valid:
        raise CheckpointError(
            f"{path} is damaged (expected JSON with a files table of sha256 sums), so {folder} cannot "
            f"be verified; use another checkpoint or copy this one again"
        )
    return files


def _mismatch(folder: str, name: str) -> CheckpointError:
    return CheckpointError(
        f"{storage.join(folder, name)} does not match its sha256 recorded when it was written: the "
        f"file is corrupt or was changed since; use another checkpoint (e.g. an earlier step of the "
        f"run) or copy this one again"
    )


def read_verified(folder: str, name: str, sums: dict[str, str] | None) -> bytes:
    """The bytes of folder/name, checked against the recorded sha256 when the folder has a table (read
    once: the same bytes are hashed and used)."""
    data = storage.read_bytes(storage.join(folder, name))
    if sums is not None:
        if name not in sums:
            raise CheckpointError(f"{storage.join(folder, name)} has no recorded sha256 to verify it by")
        if digest(data) != sums[name]:
            raise _mismatch(folder, name)
    return data


def verify_file(folder: str, name: str, sums: dict[str, str]) -> None:
    """Check one listed file against its recorded sha256 (streamed: it is not needed in memory)."""
    path = storage.join(folder, name)
    if not storage.isfile(path):
        raise CheckpointError(f"{path} is missing (its sha256 is recorded: it belongs there)")
    if storage.sha256(path) != sums[name]:
        raise _mismatch(folder, name)


def write_files(folder: str, files: dict[str, bytes]) -> None:
    """Write a folder's files (each whole), then checksums.json listing them. An earlier
    checksums.json goes first, so a write cut short never looks complete."""
    storage.remove(storage.join(folder, CHECKSUMS_NAME))
    for name, data in files.items():
        storage.write_bytes(storage.join(folder, name), data)
    sums = {name: digest(data) for name, data in files.items()}
    storage.write_bytes(storage.join(folder, CHECKSUMS_NAME), checksums_json(sums))

"""Checksummed folders: every folder this project writes (training checkpoints, `albert import`,
`albert export`) lists its files' sha256 in checksums.json, written last, and every load verifies the
files it reads against it. A registry version (promotion/registry.py) is a copy of config.json,
model.safetensors and spm.model whose lineage.json records the same table: it is verified the same
way. A folder with trainer.json but no checksums.json is a training checkpoint whose write did not
finish, and is refused.

Big files are written and read as files, never as one bytes object: safetensors are written straight
to a local file (`Content`: the bytes of a small file, or a function that writes the file at a local
path) and hashed from it; they are loaded from a local file (`read_tensors`: the file itself, or a
temporary copy of a remote one), so a checkpoint of N bytes does not cost N more bytes of Python heap.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable

from core import storage
from core.errors import UserError

# A file's content: its bytes (small files), or a function that writes it at the local path it is
# given (safetensors.torch.save_file with its tensors bound: the file is never built in memory).
Content = bytes | Callable[[str], None]

CHECKSUMS_NAME = "checksums.json"
TRAINER_NAME = "trainer.json"  # only a training checkpoint (model.checkpoint) has it
LINEAGE_NAME = "lineage.json"  # a registry version's (promotion/registry.py): its files' sha256 under "files"


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


def write_local(path: str, content: Content) -> str:
    """Write `content` at the local `path`; returns the file's sha256 (hashed from the file, streamed)."""
    if isinstance(content, bytes):
        with open(path, "xb") as f:
            f.write(content)
        return digest(content)
    with open(path, "xb"):  # the mode a new file gets under the umask (group-readable under 022) ...
        mode = os.stat(path).st_mode
    content(path)
    os.chmod(path, mode)  # ... which safetensors' save_file does not give (it writes 0600)
    return storage.sha256(path)


def write_files(folder: str, files: dict[str, Content]) -> None:
    """Write a folder's files (each whole: storage.local_file_for), then checksums.json listing them.
    An earlier checksums.json goes first, so a write cut short never looks complete; and the files
    it did write go too (a full disk, Ctrl-C): worth nothing without the table, they hold the space
    the rerun needs."""
    storage.remove(storage.join(folder, CHECKSUMS_NAME))
    sums = {}
    try:
        for name, content in files.items():
            with storage.local_file_for(storage.join(folder, name)) as local:
                sums[name] = write_local(local, content)
        storage.write_bytes(storage.join(folder, CHECKSUMS_NAME), checksums_json(sums))
    except BaseException:
        for name in sums:
            with contextlib.suppress(OSError):  # an error here must not hide the one that says why
                storage.remove(storage.join(folder, name))
        raise


def read_tensors(folder: str, name: str, sums: dict[str, str] | None) -> dict:
    """The tensors of the safetensors file folder/name, checked against its recorded sha256 when the
    folder has a table, without reading the file into memory: it is hashed streamed, then loaded from
    disk (safetensors.torch.load_file); a remote file through a local temporary copy (the copy is what
    is hashed and loaded). Only safetensors: no pickle. CheckpointError for a mismatch or a file that
    does not parse (truncated, corrupt)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    path = storage.join(folder, name)
    with storage.local_file(path) as local:
        before = _identity(local)
        if sums is not None:
            if name not in sums:
                raise CheckpointError(f"{path} has no recorded sha256 to verify it by")
            if storage.sha256(local) != sums[name]:
                raise _mismatch(folder, name)
        try:
            tensors = load_file(local)
        except SafetensorError as err:
            raise CheckpointError(
                f"{path} is truncated or corrupt ({err}); use another checkpoint or copy this one again"
            ) from None
        if _identity(local) != before:  # replaced between the hash and the load: not what was verified
            raise CheckpointError(f"{path} changed while it was read; load it again")
        return tensors


def _identity(local: str) -> tuple[int, int, int]:
    """What tells one local file from another at the same path: inode, size, modification time."""
    st = os.stat(local)
    return st.st_ino, st.st_size, st.st_mtime_ns

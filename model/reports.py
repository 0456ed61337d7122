"""Report files (`albert evaluate --out`, `albert finetune --out`): before any work, --out must be a
file the command may write; afterwards the report is written whole, a failure one line."""

from __future__ import annotations

import uuid

from core import outdir, storage
from core.errors import UserError


def _read_report(path: str) -> dict | None:
    """The JSON object in `path`, or None when it holds something else (read only if it starts like
    JSON: --out may name a large file of another kind)."""
    try:
        with storage.open_read(path) as f:
            if f.read(1) != b"{":
                return None
        data = storage.read_json(path)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def check_report_out(path: str, command: str, is_ours, force: bool, inputs=()) -> None:
    """Before any work: `path` must be a file this command may write: not a folder; not a file of
    something else (a report `is_ours` recognises is replaced; --force replaces anything, except the
    files of `inputs`: (how the user names it, path) of what the command reads, links resolved); in a
    folder that takes files (a write is tried there and removed, so a read-only folder fails now, not
    after the work)."""
    if storage.isdir(path):
        raise UserError(
            f"--out {path} is a folder; give a file name, e.g. {storage.join(path, 'report.json')}"
        )
    exists = storage.exists(path)
    data = _read_report(path) if exists else None
    ours = data is not None and is_ours(data)
    # A new report, or ours, may go inside an input folder (evaluate's default: beside the checkpoint).
    outdir.check_apart(path, inputs, allowed=("is inside",) if ours or not exists else ())
    if exists and not force:
        if not ours:
            raise UserError(
                f"--out {path} exists and is not an `albert {command}` report; give another --out, or "
                f"pass --force to replace it"
            )
    _probe_write(path)


def _probe_write(path: str) -> None:
    """Write and remove an empty file in the folder `path` goes to (locally: its nearest existing
    ancestor, so that no folder is created for a run that may still be refused)."""
    folder = storage.dirname(path) or "."
    while not storage.is_url(folder) and not storage.exists(folder):
        parent = storage.dirname(folder) or "."
        if parent == folder:
            break
        folder = parent
    if storage.isfile(folder):
        raise UserError(f"cannot write --out {path}: {folder} is a file, not a folder")
    probe = storage.join(folder, f".albert-probe-{uuid.uuid4().hex[:8]}")
    try:
        storage.write_bytes(probe, b"")
        storage.remove(probe)
    except OSError as err:
        raise UserError(f"cannot write --out {path}: {err.strerror or err}") from None


def write_report(path: str, obj, indent: int | None = 2) -> None:
    try:
        storage.write_json(path, obj, indent=indent)
    except OSError as err:  # the disk filled up, the folder went away since check_report_out
        raise UserError(f"cannot write {path}: {err.strerror or err}") from None

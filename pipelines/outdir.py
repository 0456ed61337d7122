"""Output folders: a stage writes only into a folder it owns.

A stage's `--out` is its own when the folder

- does not exist or is empty, or
- carries the marker `.albert-stage.json` of an earlier run of the SAME stage (written by `claim`), or
- was written by the same stage before markers existed (its `manifest.json` names the stage, or the
  stage's `legacy` files are there: a run folder's train_config.json or checkpoints/).

Anything else holds someone's files: the stage refuses before any work starts and says how to proceed
(another --out, or --force, which takes the folder over; the stage then removes only the files of its
own kinds that an earlier run would have written, never anything else). A folder marked by another
stage is refused even with --force: `albert instances --out` on a corpus folder is a mistake, not a
takeover.

Claiming writes the marker (again): a folder that cannot be written is refused then, before any work.
Works on local paths and fsspec URLs alike (pipelines.core.storage).
"""

from __future__ import annotations

import datetime as _dt
import json

from pipelines.core import storage
from pipelines.core.errors import UserError

MARKER = ".albert-stage.json"


def _marker_stage(out_dir: str) -> str | None:
    path = storage.join(out_dir, MARKER)
    if not storage.exists(path):
        return None
    try:
        return str(storage.read_json(path)["stage"])
    except (ValueError, KeyError, TypeError):
        return "?"  # a damaged marker: treated as another stage's


def _manifest_stage(out_dir: str) -> str | None:
    path = storage.join(out_dir, "manifest.json")
    if not storage.exists(path):
        return None
    try:
        return storage.read_json(path).get("stage")
    except (ValueError, AttributeError):
        return None


def owner(out_dir: str, legacy: tuple[str, ...] = ()) -> str | None:
    """The stage that owns `out_dir` (marker, else the manifest, else `legacy` files -> "legacy"),
    "" for a missing or empty folder, None for a folder of someone else's files."""
    if not storage.isdir(out_dir) and not storage.exists(out_dir):
        return ""
    if storage.isfile(out_dir):
        return None
    entries = storage.listdir(out_dir)
    if not entries:
        return ""
    stage = _marker_stage(out_dir) or _manifest_stage(out_dir)
    if stage:
        return stage
    if legacy and any(name in entries for name in legacy):
        return "legacy"
    return None


def claim(out_dir: str, stage: str, *, force: bool = False, legacy: tuple[str, ...] = ()) -> None:
    """Make `out_dir` the output folder of `stage`, or raise a UserError saying why not and what to do.

    `legacy`: names of files or folders that only this stage writes, which mark a folder it wrote before
    markers existed (e.g. a run folder's "train_config.json", "checkpoints")."""
    found = owner(out_dir, legacy)
    if storage.isfile(out_dir):
        raise UserError(f"--out {out_dir} is a file; give a folder")
    if found in ("", stage, "legacy"):
        _write_marker(out_dir, stage)
        return
    if found is not None:
        raise UserError(
            f"--out {out_dir} holds the output of `albert {found}`; give `albert {stage}` its own --out"
        )
    if not force:
        names = sorted(storage.listdir(out_dir))
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        raise UserError(
            f"--out {out_dir} is not empty and was not written by `albert {stage}` ({shown}); "
            f"give an empty or new --out, or pass --force to let {stage} write there "
            f"(it replaces only the files it writes)"
        )
    _write_marker(out_dir, stage)


def _write_marker(out_dir: str, stage: str) -> None:
    """Write the marker, or write our own marker again: either way a probe, so a folder that cannot be
    written (read-only, under a file, a full disk) is refused now, in one line, before any work."""
    path = storage.join(out_dir, MARKER)
    try:
        if _marker_stage(out_dir) == stage:
            storage.write_bytes(path, storage.read_bytes(path))
            return
        storage.makedirs(out_dir)
        created = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
        storage.write_text(path, json.dumps({"stage": stage, "created_at": created}) + "\n")
    except OSError as err:
        raise UserError(
            f"cannot write to --out {out_dir} ({err.strerror or err}); give a folder you can write to"
        ) from None

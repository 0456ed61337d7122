"""Output folders: a stage writes only into a folder it owns, alone, and never into its own inputs.

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

One writer at a time: claiming takes the folder's lock (core.lock), held until the scope the
claim was taken in ends (`@outdir.scope()` on each stage's run function; `albert` holds one per
command). A second writer is refused in one line naming the holder (host, pid, since when); a holder
that died is taken over with a line on stderr, so a kill -9 never blocks a rerun.

Never into an input: `--out` is compared with every input of the command once links are resolved
(`check_apart`): an --out that is, lies inside or holds an input is refused, even with --force, so a
link cannot lead a write into the files being read.

Claiming writes the marker (again): a folder that cannot be written is refused then, before any work,
and a read-only file system, a permission, a symlink loop or a link to nowhere are named as such.
Works on local paths and fsspec URLs alike (core.storage).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import posixpath
from collections.abc import Iterable

from core import lock, oserrors, storage
from core.errors import UserError
from core.lock import scope

MARKER = ".albert-stage.json"
__all__ = ["MARKER", "check_apart", "claim", "owner", "relation", "scope"]


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
    entries = [name for name in storage.listdir(out_dir) if name != lock.NAME]  # a lock: no file of ours
    if not entries:
        return ""
    stage = _marker_stage(out_dir) or _manifest_stage(out_dir)
    if stage:
        return stage
    if legacy and any(name in entries for name in legacy):
        return "legacy"
    return None


def claim(
    out_dir: str,
    stage: str,
    *,
    force: bool = False,
    legacy: tuple[str, ...] = (),
    inputs: Iterable[tuple[str, str | None]] = (),
) -> lock.Lock:
    """Make `out_dir` the output folder of `stage` for the length of the current scope (its lock is
    held until then), or raise a UserError saying why not and what to do.

    `legacy`: names of files or folders that only this stage writes, which mark a folder it wrote before
    markers existed (e.g. a run folder's "train_config.json", "checkpoints"). `inputs`: (how the user
    names it, path) of everything the command reads; --out must stay apart from each (check_apart)."""
    _check_path(out_dir)
    found = owner(out_dir, legacy)
    if storage.isfile(out_dir):
        raise UserError(f"--out {out_dir} is a file; give a folder")
    if found is not None and found not in ("", stage, "legacy"):
        raise UserError(
            f"--out {out_dir} holds the output of `albert {found}`; give `albert {stage}` its own --out"
        )
    check_apart(out_dir, inputs)
    if found is None and not force:
        names = sorted(n for n in storage.listdir(out_dir) if n != lock.NAME)
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        raise UserError(
            f"--out {out_dir} is not empty and was not written by `albert {stage}` ({shown}); "
            f"give an empty or new --out, or pass --force to let {stage} write there "
            f"(it replaces only the files it writes)"
        )
    try:
        held = lock.take(out_dir, stage)
    except lock.Busy as busy:
        raise UserError(f"--out {out_dir} is {busy}") from None
    except OSError as err:
        raise UserError(f"cannot write to --out {out_dir}: {oserrors.describe(err, out_dir)}") from None
    try:
        _write_marker(out_dir, stage)
    except BaseException:
        held.release()
        raise
    return held


def _resolved(path: str) -> str:
    """`path` with every link resolved (local), or normalized (a URL: no links there)."""
    if storage.is_url(path):
        proto, rest = path.split("://", 1)
        return f"{'gs' if proto == 'gcs' else proto}://{posixpath.normpath(rest)}"
    return os.path.realpath(storage.local_path(path))


def relation(out: str, source: str) -> str | None:
    """How `out` lies to `source` once links are resolved: "is", "is inside", "holds", or None."""
    out_path, source_path = _resolved(out), _resolved(source)
    if out_path == source_path:
        return "is"
    if out_path.startswith(source_path.rstrip("/") + "/"):
        return "is inside"
    if source_path.startswith(out_path.rstrip("/") + "/"):
        return "holds"
    return None


def check_apart(out: str, inputs: Iterable[tuple[str, str | None]], allowed: tuple[str, ...] = ()) -> None:
    """Refuse an --out that is, lies inside or holds one of `inputs` ((how the user names it, path);
    None paths are skipped), links resolved: writing there would replace or mix with the files being
    read, --force or not. `allowed`: relations to let pass (a new report file "is inside" a checkpoint)."""
    for what, source in inputs:
        rel = relation(out, source) if source else None
        if rel is None or rel in allowed:
            continue
        links = [
            f"{p} is {_resolved(p)}" for p in (out, source) if _resolved(p) != storage.absolute(p).rstrip("/")
        ]
        via = f" (links resolved: {'; '.join(links)})" if links else ""
        raise UserError(f"--out {out} {rel} {what} {source}{via}; give an --out outside it")


def _check_path(out_dir: str) -> None:
    """Refuse a local --out whose path cannot lead to a folder: a symlink loop, or a link to nothing
    (os.makedirs would only say "File exists")."""
    if storage.is_url(out_dir):
        return
    path = os.path.abspath(storage.local_path(out_dir))
    try:
        os.stat(path)
        return
    except FileNotFoundError:
        pass
    except OSError as err:  # ELOOP, EACCES on the way, ...
        raise UserError(f"cannot write to --out {out_dir}: {oserrors.describe(err, out_dir)}") from None
    while path != os.path.dirname(path):
        if os.path.islink(path) and not os.path.exists(path):
            raise UserError(
                f"--out {out_dir}: {path} is a link to {os.readlink(path)}, which does not exist; "
                f"create it, or give another --out"
            )
        path = os.path.dirname(path)


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
        raise UserError(f"cannot write to --out {out_dir}: {oserrors.describe(err, out_dir)}") from None

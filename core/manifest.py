"""`manifest.json`: the last file every stage writes into its output folder (the data contract).

A folder without a manifest is incomplete and is never read by the next stage. The manifest records the
inputs (paths and content hashes), the options, the seed, the code version, the counts, and the hashes
of the stage's own outputs. Paths may be local or any fsspec URL (gs://bucket/prefix, memory://...).
"""

from __future__ import annotations

import datetime as _dt
import os
import subprocess
from importlib import metadata

from core import storage
from core.errors import UserError

MANIFEST = "manifest.json"


def code_version() -> str:
    """The git commit of the running code when it is a checkout, else the installed package version."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        out = subprocess.run(
            ["git", "-C", here, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=True
        )
        dirty = subprocess.run(
            ["git", "-C", here, "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        try:
            return "albert-factory==" + metadata.version("albert-factory")
        except metadata.PackageNotFoundError:
            return "unknown"


def package_versions(names: tuple[str, ...]) -> dict[str, str]:
    """{distribution: installed version, or "not installed"}: what a lineage records next to the code."""
    out = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def write_manifest(out_dir: str, stage: str, **fields) -> dict:
    """Write `<out_dir>/manifest.json` (to a temporary name, then renamed where the filesystem can).

    `fields` are stage specific: inputs, config, seed, counts, outputs, ... They must be JSON-serialisable.
    """
    manifest = {
        "stage": stage,
        "created_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "code_version": code_version(),
        **fields,
    }
    # One atomic write: a temporary file renamed locally, a single upload on an object store.
    storage.write_json(storage.join(out_dir, MANIFEST), manifest)
    return manifest


def read_manifest(stage_dir: str) -> dict:
    """The manifest of a finished stage, or a UserError saying the folder is incomplete."""
    path = storage.join(stage_dir, MANIFEST)
    if not storage.exists(path):
        raise UserError(
            f"{stage_dir} has no {MANIFEST}: that stage did not finish (or this is the wrong folder)"
        )
    try:
        return storage.read_json(path)
    except ValueError as err:
        raise UserError(f"{path} is not valid JSON ({err}): the stage folder is damaged") from None

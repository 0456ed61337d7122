"""`manifest.json`: the last file every stage writes into its output folder (DESIGN.md, data contracts).

A folder without a manifest is incomplete and is never read by the next stage. The manifest records the
inputs (paths and content hashes), the options, the seed, the code version, the counts, and the hashes
of the stage's own outputs. Paths may be local or any fsspec URL (gs://bucket/prefix, memory://...).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import subprocess
from importlib import metadata

import fsspec

from pipelines.errors import UserError

MANIFEST = "manifest.json"


def file_sha256(path: str, chunk: int = 1 << 20) -> str:
    """Content hash of a local file or fsspec URL, streamed."""
    h = hashlib.sha256()
    with fsspec.open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


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
    text = json.dumps(manifest, indent=2, ensure_ascii=False, sort_keys=False) + "\n"
    fs, _, (root,) = fsspec.get_fs_token_paths(out_dir)
    final = root.rstrip("/") + "/" + MANIFEST
    tmp = final + ".tmp"
    with fs.open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    fs.mv(tmp, final)
    return manifest


def read_manifest(stage_dir: str) -> dict:
    """The manifest of a finished stage, or a UserError saying the folder is incomplete."""
    path = stage_dir.rstrip("/") + "/" + MANIFEST
    fs, _, (p,) = fsspec.get_fs_token_paths(path)
    if not fs.exists(p):
        raise UserError(
            f"{stage_dir} has no {MANIFEST}: that stage did not finish (or this is the wrong folder)"
        )
    with fs.open(p, "r", encoding="utf-8") as f:
        return json.load(f)

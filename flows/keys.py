"""Stage keys: the names of the content-addressed stage folders.

A stage writes `<storage_root>/<stage>/<key>/` where key = sha256 of its input content hashes and its
options (`stage_key`). A folder that holds a manifest.json is finished and is reused as is
(flows/stage.py): re-running a flow with unchanged inputs and options recomputes nothing, and a rerun
after a failure redoes only the stages whose manifest is missing (pretraining resumes from its last
checkpoint, because its folder, and so its --out, is the same).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from core.errors import UserError
from core.manifest import MANIFEST, read_manifest

KEY_CHARS = 16


def canonical(obj: Any) -> str:
    """obj as JSON with sorted keys and no spaces: the same text for the same value, every time."""
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def stage_key(stage: str, **parts: Any) -> str:
    """The name of a stage folder: a hash of the stage, its inputs' content hashes and its options."""
    return hashlib.sha256(canonical({"stage": stage, **parts}).encode("utf-8")).hexdigest()[:KEY_CHARS]


def output_hashes(stage_dir: str) -> Any:
    """The content hashes of a finished stage's outputs, from its manifest: what a downstream stage
    keys on (stable across rebuilds, unlike the manifest's timestamps)."""
    manifest = read_manifest(stage_dir)
    outputs = manifest.get("outputs")
    if outputs is None:
        raise UserError(f"{stage_dir}/{MANIFEST} lists no outputs")
    return outputs

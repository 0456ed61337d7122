"""Where a registered checkpoint came from: its lineage.json (promotion/registry.py stores it, with the
sha256 of every file of the version under "files").
"""

from __future__ import annotations

import datetime as _dt

from core import storage
from core.manifest import MANIFEST, code_version, package_versions

PACKAGES = ("albert-factory", "torch", "apache-beam", "prefect", "sentencepiece", "safetensors", "numpy")
"""The distributions whose versions a lineage records."""


def build_lineage(
    *,
    checkpoint_dir: str,
    corpus_dir: str | None = None,
    vocab_dir: str | None = None,
    instances_dir: str | None = None,
    run_dir: str | None = None,
    flow_run_id: str | None = None,
    parent_version: str | None = None,
    init_checkpoint: str | None = None,
) -> dict:
    """Where a checkpoint came from: stage folders with the sha256 of their manifests, the vocabulary
    and config hashes, the code version and the package versions."""

    def manifest_of(d: str | None) -> dict | None:
        if not d:
            return None
        path = storage.join(d, MANIFEST)
        return {"path": d, "manifest_sha256": storage.sha256(path) if storage.exists(path) else None}

    spm = storage.join(checkpoint_dir, "spm.model")
    if not storage.exists(spm) and vocab_dir:
        spm = storage.join(vocab_dir, "spm.model")
    return {
        "checkpoint": checkpoint_dir,
        "corpus": manifest_of(corpus_dir),
        "vocab": {
            **(manifest_of(vocab_dir) or {}),
            "spm_sha256": storage.sha256(spm) if storage.exists(spm) else None,
        },
        "instances": manifest_of(instances_dir),
        "run": manifest_of(run_dir),
        "config_sha256": storage.sha256(storage.join(checkpoint_dir, "config.json")),
        "git_commit": code_version(),
        "packages": package_versions(PACKAGES),
        "flow_run_id": flow_run_id,
        "parent_version": parent_version,
        "init_checkpoint": init_checkpoint,
        "created_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }


def candidate_lineage(
    given: dict, *, candidate: str, instances_dir: str, parent_version: str | None, flow_run_id: str | None
) -> dict:
    """The lineage of a candidate the promote flow registers: the stage folders its caller knows
    (`given`: corpus_dir, vocab_dir, instances_dir, run_dir, parent_version, init_checkpoint), else the
    eval set it was checked against and the production version it faced."""
    return build_lineage(
        checkpoint_dir=candidate,
        corpus_dir=given.get("corpus_dir"),
        vocab_dir=given.get("vocab_dir"),
        instances_dir=given.get("instances_dir", instances_dir),
        run_dir=given.get("run_dir"),
        flow_run_id=flow_run_id,
        parent_version=given.get("parent_version", parent_version),
        init_checkpoint=given.get("init_checkpoint"),
    )

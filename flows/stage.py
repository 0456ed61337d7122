"""The stage runner of the flows: key -> reuse -> run -> manifest -> result, in one place.

A stage flow computes its key (flows/keys.py `stage_key`: the stage, its inputs' content hashes and
its options), names its folder `<storage_root>/<folder>/<key>/` (`stage_dir`) and hands both to
`run_stage` with `run`, the call that fills the folder. A folder that holds a manifest.json is
finished (the manifest is written last) and is reused as is; otherwise `run(stage_dir)` builds it.
`run` calls the stage's Prefect task (flows/prefect_run.py `stage_task`: retries for transient failures
only, a failure artifact after the last one, a timeout), so what a flow adds is a few lines of
sequencing:

    key = stage_key("vocab", corpus=output_hashes(corpus_dir), options=options)
    done = run_stage("vocab", stage_dir(storage_root, "vocab", key), lambda out: vocab_task(out))
    return done.result(counts=done.manifest["counts"])
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core import storage
from core.manifest import MANIFEST, read_manifest
from flows.prefect_run import flow_run_id, logger

DEFAULT_ROOT = "out/factory"
"""The storage root of every flow that is given none: stage folders, runs, evaluations, the registry."""


def stage_dir(storage_root: str, folder: str, key: str) -> str:
    """`<storage_root>/<folder>/<key>`, the root made absolute: the folder a stage run writes, and the
    name a rerun with the same inputs and options finds again."""
    return storage.join(storage.absolute(storage_root), folder, key)


def is_complete(stage_dir: str) -> bool:
    """A stage folder is finished when its manifest exists (it is written last)."""
    return storage.exists(storage.join(stage_dir, MANIFEST))


@dataclass(frozen=True)
class StageRun:
    """A finished stage folder: built by this run, or reused."""

    stage: str
    dir: str
    key: str
    reused: bool
    manifest: dict

    def result(self, **extra: Any) -> dict:
        """What a stage flow returns: {"stage", "dir", "key", "reused", "flow_run_id", **extra}
        (flow_run_id: the Prefect run that returned it, which the run summary links to)."""
        return {
            "stage": self.stage,
            "dir": self.dir,
            "key": self.key,
            "reused": self.reused,
            "flow_run_id": flow_run_id(),
            **extra,
        }


def run_stage(stage: str, out: str, run: Callable[[str], object]) -> StageRun:
    """Reuse the finished folder `out` of `stage`, or build it with `run(out)`, which must leave a
    manifest.json there (written last); then read that manifest. The key is the folder's name."""
    reused = is_complete(out)
    if reused:
        logger().info("%s %s is up to date (same inputs and options): reusing it", stage, out)
    else:
        logger().info("%s: building %s", stage, out)
        run(out)
    return StageRun(stage, out, storage.basename(out), reused, read_manifest(out))

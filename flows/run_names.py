"""What a flow run is called and tagged, so that a user tells runs apart in the Prefect UI.

Prefect names a run at random (smooth-frog) unless the flow gives a name. Each stage flow names its runs
from their parameters: "corpus | peoples-daily", "pretrain | tiny | 250 steps", "repretrain | 2026-W48"
(the ISO week of the run's scheduled start, which is what a weekly schedule's run is about). Tags: the
stage ("stage:pretrain") and where the outputs go ("storage:local" or "storage:gs"), on the run and,
through Prefect's tag context, on the subflow runs it starts.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from core import storage

SEP = " | "  # the run graph's font has no middle dot


def _sources(p: dict) -> str:
    kinds = [str(s).split(":", 1)[0] for s in p.get("sources") or []]
    return "+".join(dict.fromkeys(kinds)) or "-"


def leaf(path: Any) -> str:
    """The last part of a path or URL ("step-250" of ".../checkpoints/step-250/"); "-" for none."""
    return storage.basename(str(path).rstrip("/")) if path else "-"


def _week(p: dict) -> str:
    from prefect.runtime import flow_run

    when = flow_run.scheduled_start_time or datetime.datetime.now(datetime.UTC)
    year, week, _ = when.isocalendar()
    return f"{year}-W{week:02d}"


# flow name -> the parts of its run names after the stage, from the run's parameters
PARTS: dict[str, Callable[[dict], list[str]]] = {
    "build-corpus": lambda p: [_sources(p), p.get("runner") or "DirectRunner"],
    "train-vocab": lambda p: [f"{p.get('vocab_size', 8000):,} pieces"],
    "build-instances": lambda p: [
        f"L{p.get('max_seq_length', 128)}",
        f"{p.get('whole_word', 'zh')} whole words",
    ],
    "pretrain": lambda p: [
        str(p.get("config", "tiny")),
        f"{p.get('steps', '?')} steps",
        str(p.get("device", "auto")),
    ],
    "evaluate": lambda p: [leaf(p.get("checkpoint"))],
    "promote": lambda p: [str(p.get("model_name") or "albert"), leaf(p.get("candidate"))],
    "rollback": lambda p: [str(p.get("model_name") or "albert")],
    "repretrain": lambda p: [_week(p), _sources(p), str(p.get("config", "tiny"))],
}
STAGE_NAMES = {  # what a user calls the stage
    "build-corpus": "corpus",
    "train-vocab": "vocab",
    "build-instances": "instances",
}


def run_name(flow: str, parameters: dict) -> str:
    """ "corpus | peoples-daily | DirectRunner" for a build-corpus run with those parameters."""
    parts = PARTS.get(flow, lambda p: [])(parameters)
    return SEP.join([STAGE_NAMES.get(flow, flow), *[x for x in parts if x]])


def current_run_name(flow: str) -> Callable[[], str]:
    """The flow_run_name callable of `flow`: its run's name from the run's parameters."""

    def name() -> str:
        from prefect.runtime import flow_run

        return run_name(flow, dict(flow_run.parameters or {}))

    return name


def run_tags(flow: str, parameters: dict) -> list[str]:
    """The stage and the storage kind: ["stage:pretrain", "storage:gs"]."""
    root = parameters.get("storage_root") or parameters.get("registry")
    tags = [f"stage:{STAGE_NAMES.get(flow, flow)}"]
    if root:
        tags.append("storage:" + (str(root).split("://", 1)[0] if storage.is_url(str(root)) else "local"))
    return tags

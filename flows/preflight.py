"""Checks a flow runs before its first stage: everything a later stage would refuse, refused now.

A scheduled repretrain runs corpus, vocabulary, instances and days of pretraining before fine-tuning
and the gate. A wrong pass-through argument or a missing deployment must stop it at minute zero with
one line, not after the GPU time. Typed parameters (flows/params.py) cover the fixed sets of values;
these checks cover what a type cannot: free-form argument lists parsed by the stages' own parsers, the
Beam runner's required options, files and deployments that must exist.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core import storage
from core.errors import UserError
from flows.params import PRESETS
from flows.stage_options import stage_options


def stage_args_problem(command: str, cls: type, argv: Sequence[str], **known: Any) -> str | None:
    """Why `albert COMMAND` would refuse these extra arguments, or None: the options object (a `cls`)
    is built as the flow will build it (flows/stage_options.py), `known` standing for the
    options the flow itself sets."""
    try:
        stage_options(command, cls, argv, **known)
    except UserError as err:
        return f"{command} arguments {list(argv)}: {err}"
    return None


def config_problem(config: str) -> str | None:
    if config in PRESETS:
        return None
    if not config.endswith(".json"):
        return f"config {config!r} is neither a preset ({', '.join(PRESETS)}) nor a .json file"
    if not storage.isfile(config):
        return f"config file {config} does not exist"
    return None


def beam_problem(runner: str, beam_args: Sequence[str]) -> str | None:
    from pipelines.corpus.stage import check_runner_flags

    try:
        check_runner_flags(runner, list(beam_args))
    except UserError as err:
        return f"{runner} with {list(beam_args)}: {err}"
    return None


def deployment_problem(name: str) -> str | None:
    """The deployment a run would be handed to must exist on the Prefect server in use."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    if "/" not in name:
        return f"deployment {name!r}: expected FLOW/NAME, e.g. pretrain/gpu-vertex"
    try:
        with get_client(sync_client=True) as client:
            client.read_deployment_by_name(name)
    except ObjectNotFound:
        return f"deployment {name} is not registered on this Prefect server (run `albert deploy`)"
    return None


def folder_problem(what: str, path: str | None, marker: str) -> str | None:
    if path and not storage.exists(storage.join(path, marker)):
        return f"{what} {path} has no {marker}"
    return None


def check(problems: list[str | None], flow: str) -> None:
    """Raise one UserError listing every problem found (none: nothing happens)."""
    found = [p for p in problems if p]
    if found:
        raise UserError(f"{flow} refused before any stage ran: " + "; ".join(found))

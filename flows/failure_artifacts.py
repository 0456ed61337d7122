"""Failure artifacts: the `on_failure` hooks of every flow and stage task write a markdown artifact
`<flow-or-task>-failure` with the error, the last output lines of a stage process, the parameters, and
how to resume (the key is stable, so the Prefect UI shows the latest failure of each)."""

from __future__ import annotations

import traceback

from prefect.artifacts import create_markdown_artifact

from flows.keys import canonical


def artifact_key(*parts: str) -> str:
    """Prefect artifact keys: lowercase letters, digits and dashes."""
    raw = "-".join(parts).lower()
    return "-".join(filter(None, "".join(c if c.isalnum() and c.isascii() else "-" for c in raw).split("-")))


def _failure_markdown(kind: str, name: str, run, state) -> str:
    exc = state.data if isinstance(state.data, BaseException) else None
    if exc is None:
        try:
            exc = state.result(raise_on_failure=False)
        except Exception:  # noqa: BLE001
            exc = None
    params = getattr(run, "parameters", None) or {}
    detail = (
        "".join(traceback.format_exception_only(type(exc), exc)).strip()
        if isinstance(exc, BaseException)
        else (state.message or "unknown error")
    )
    lines = [
        f"# {kind} `{name}` failed",
        "",
        f"**Run:** `{getattr(run, 'name', '?')}` ({getattr(run, 'id', '?')})",
        "",
        f"**Error:** {state.message or ''}",
        "",
        "```",
        detail[-4000:],
        "```",
    ]
    tail = getattr(exc, "tail", None)
    if tail:
        lines += ["", "**Last output lines:**", "", "```", *tail[-20:], "```"]
    if params:
        lines += ["", "**Parameters:**", "", "```json", canonical(params)[:4000], "```"]
    lines += [
        "",
        "**To resume:** run the same flow with the same parameters. Finished stages (a folder with a "
        "manifest.json) are reused; pretraining continues from its last checkpoint.",
    ]
    return "\n".join(lines)


def flow_failure_artifact(flow, flow_run, state) -> None:
    """on_failure hook of every flow: a markdown artifact `<flow>-failure` saying what failed and how
    to resume."""
    create_markdown_artifact(
        markdown=_failure_markdown("Flow", flow.name, flow_run, state),
        key=artifact_key(flow.name, "failure"),
        description=f"why {flow.name} failed",
    )


def task_failure_artifact(task, task_run, state) -> None:
    """on_failure hook of stage tasks (after the last retry)."""
    create_markdown_artifact(
        markdown=_failure_markdown("Task", task.name, task_run, state),
        key=artifact_key(task.name, "failure"),
        description=f"why {task.name} failed",
    )

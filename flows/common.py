"""What every flow shares: content-addressed stage folders, a stage's options object from the flow's
values and pass-through arguments (`stage_options`: the flows then call the stage's typed function),
a stage as its own process with its output streamed to the flow logs, the retry policy, failure
artifacts.

Stage folders. A stage writes `<storage_root>/<stage>/<key>/` where key = sha256 of its input content
hashes and its options (`stage_key`). A folder that holds a manifest.json is finished and is reused as
is: re-running a flow with unchanged inputs and options recomputes nothing, and a rerun after a failure
redoes only the stages whose manifest is missing (pretraining resumes from its last checkpoint, because
its folder, and so its --out, is the same).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import subprocess
import sys
import threading
import traceback
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import MISSING
from typing import Any, TypeVar

from prefect import get_run_logger
from prefect.artifacts import create_markdown_artifact
from prefect.context import FlowRunContext, TaskRunContext

from core import config_cli, storage
from core.errors import UserError
from core.manifest import MANIFEST, read_manifest

KEY_CHARS = 16
T = TypeVar("T")

# Failures that a retry cannot fix: bad input or a bug. Everything else (I/O, network, a killed
# worker, a trainer that died with a signal) is retried with exponential backoff.
NOT_TRANSIENT = (
    UserError,
    ValueError,
    TypeError,
    KeyError,
    AttributeError,
    AssertionError,
    ImportError,
    NotImplementedError,
)


# ----------------------------------------------------------------------------------- stage folders


def is_complete(stage_dir: str) -> bool:
    """A stage folder is finished when its manifest exists (it is written last)."""
    return storage.exists(storage.join(stage_dir, MANIFEST))


# ------------------------------------------------------------------------------------ stage keys


def canonical(obj: Any) -> str:
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


def stage_result(stage: str, stage_dir: str, key: str, reused: bool, **extra: Any) -> dict:
    return {"stage": stage, "dir": stage_dir, "key": key, "reused": reused, **extra}


# ------------------------------------------------------------------------------------- running


class ArgumentError(UserError):
    """Arguments a stage's parser refused (argparse would have exited the whole process)."""


class _StageParser(argparse.ArgumentParser):
    """argparse that raises instead of exiting: inside a flow, SystemExit would end the run Crashed,
    with no retry logic, failure artifact or message saying what was wrong."""

    def error(self, message: str):
        raise ArgumentError(f"{self.prog}: {message}")

    def exit(self, status: int = 0, message: str | None = None):
        raise ArgumentError(f"{self.prog}: {(message or '').strip() or f'exited with status {status}'}")


def stage_options(command: str, cls: type[T], argv: Sequence[str], **known: Any) -> T:
    """The options (a `cls`) that `albert COMMAND` would run with, given the values the flow sets
    (`known`, by option name, flat over sections) and then argv, its pass-through arguments, through
    the command's own generated parser. ArgumentError (a UserError) on arguments it refuses."""
    options, rest = stage_options_and_rest(command, cls, argv, **known)
    if rest:  # only a command that passes unknown options on (to Beam) leaves any
        raise ArgumentError(f"albert {command}: unrecognized arguments: {' '.join(rest)}")
    return options


def stage_options_and_rest(
    command: str, cls: type[T], argv: Sequence[str], **known: Any
) -> tuple[T, list[str]]:
    """stage_options, and the arguments the command leaves to Beam (PASSES_BEAM_ARGS: options it
    does not define go to Beam's PipelineOptions); [] for the other commands."""
    from flows.cli import command_module

    fields = [f for f, _ in config_cli.leaves(cls)]
    unknown = sorted(set(known) - {f.name for f in fields})
    if unknown:
        raise TypeError(f"{cls.__name__} has no option {unknown[0]!r}")
    module = command_module(command)
    parser = _StageParser(prog=f"albert {command}")
    module.add_arguments(parser)
    # The flow's values as the flags that rebuild them, then argv: a pass-through option wins, as a
    # later flag does on a command line. Required options the flow leaves to argv get a stand-in
    # value that is left out of the flags.
    unset = {
        f.name: None
        for f in fields
        if f.name not in known and f.default is MISSING and f.default_factory is MISSING
    }
    flags = config_cli.to_argv(config_cli.from_args(cls, {**unset, **known}), skip=tuple(unset))
    args = [*flags, *argv]
    if getattr(module, "PASSES_BEAM_ARGS", False):
        parsed, rest = parser.parse_known_args(args)
    else:
        parsed, rest = parser.parse_args(args), []
    return config_cli.from_args(cls, parsed), rest


class StageProcessError(RuntimeError):
    """A stage run as its own process failed; carries the tail of its output."""

    def __init__(self, cmd: Sequence[str], returncode: int, tail: list[str]):
        self.cmd, self.returncode, self.tail = list(cmd), returncode, tail
        how = f"killed by signal {-returncode}" if returncode < 0 else f"exit code {returncode}"
        super().__init__(f"`{' '.join(cmd[:4])} ...` failed ({how}); last lines:\n" + "\n".join(tail))


def albert_command(*args: str) -> list[str]:
    """`albert ARGS` through the running interpreter (works without the console script on PATH)."""
    return [sys.executable, "-m", "flows.cli", *args]


# How long a stage process may take to stop after SIGTERM before it is killed: `albert pretrain` finishes
# its step in flight and writes a checkpoint first (docs/trust-training.md), which takes a minute or
# more for a large model on a bucket.
STOP_GRACE_S = 300.0


def stream_process(
    cmd: Sequence[str],
    log: Callable[[str], None],
    timeout_s: float | None = None,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
    tail_lines: int = 40,
    stop_grace_s: float = STOP_GRACE_S,
) -> list[str]:
    """Run cmd, sending every output line to `log` as it comes; returns the last lines.

    On a timeout, and when the flow itself is stopped (a cancelled run: Prefect raises in this thread),
    the process group gets SIGTERM, and SIGKILL `stop_grace_s` later if it is still running; what it
    prints meanwhile (the trainer's checkpoint, its one `interrupted` line) still goes to `log`."""
    proc = subprocess.Popen(
        list(cmd),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},  # lines as they come, not per 8 KiB
        cwd=cwd,
        start_new_session=True,  # its own process group: a timeout stops the workers too
    )
    tail: deque[str] = deque(maxlen=tail_lines)
    timed_out, finished = threading.Event(), threading.Event()

    def watchdog():
        if finished.wait(timeout_s):  # the process ended first
            return
        timed_out.set()
        _stop_group(proc, stop_grace_s)  # the reading loop below logs what it prints meanwhile

    if timeout_s:
        threading.Thread(target=watchdog, daemon=True).start()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip("\n")
            tail.append(line)
            log(line)
        code = proc.wait()
    except BaseException:
        # The flow was cancelled or stopped: never leave a trainer behind, and log its last lines.
        _stop_group(proc, stop_grace_s, on_line=lambda line: (tail.append(line), log(line)))
        raise
    finally:
        finished.set()
    if timed_out.is_set():
        raise TimeoutError(f"`{' '.join(cmd[:4])} ...` ran longer than {timeout_s} s and was stopped")
    if code != 0:
        raise StageProcessError(cmd, code, list(tail))
    return list(tail)


def _stop_group(proc: subprocess.Popen, grace_s: float, on_line: Callable[[str], None] | None = None) -> None:
    """SIGTERM to proc's process group (it leads one: start_new_session), SIGKILL to what is left of it
    after proc exited or `grace_s` seconds. on_line: when nothing else reads proc's output any more,
    each line it prints meanwhile (read by a helper thread)."""
    from flows.server import stop_process_group

    reader = None
    if on_line is not None and proc.stdout is not None:
        reader = threading.Thread(target=_read_lines, args=(proc.stdout, on_line), daemon=True)
        reader.start()
    stop_process_group(proc, grace_s)
    if reader is not None:
        reader.join(timeout=5)  # the rest of its output; a process it left behind may hold the pipe


def _read_lines(stream, on_line: Callable[[str], None]) -> None:
    with contextlib.suppress(OSError, ValueError):  # the pipe closed under us
        for line in stream:
            on_line(line.rstrip("\n"))


# ---------------------------------------------------------------------------- retries, failures


def retry_transient(task, task_run, state) -> bool:
    """`retry_condition_fn` of every stage task: retry I/O and process failures, never bad input."""
    exc = state.data if isinstance(state.data, BaseException) else None
    if exc is None:
        try:
            exc = state.result(raise_on_failure=False)
        except Exception:  # noqa: BLE001 - no readable exception: retry, the failure is not ours to judge
            return True
    if isinstance(exc, StageProcessError) and exc.returncode == 2:
        return False  # `albert` exits 2 on bad arguments and UserErrors: a rerun fails the same way
    return not isinstance(exc, NOT_TRANSIENT)


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
    to resume (the key is stable, so the UI shows the latest failure of each flow)."""
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


def flow_run_id() -> str | None:
    ctx = FlowRunContext.get()
    if ctx and ctx.flow_run:
        return str(ctx.flow_run.id)
    tctx = TaskRunContext.get()
    return str(tctx.task_run.flow_run_id) if tctx and tctx.task_run.flow_run_id else None


def logger():
    """The run logger inside a flow or task; a module logger when called outside of one (task.fn())."""
    try:
        return get_run_logger()
    except Exception:  # noqa: BLE001 - MissingContextError outside a run
        import logging

        return logging.getLogger("flows")


# Cached and persisted results (e.g. an evaluation reused across runs) are written as JSON, never pickle:
# a result store that someone else can write to must not be able to run code here.
RESULTS = "json"


def stage_flow(name: str):
    """Prefect's @flow as every flow here uses it: a failure artifact, JSON results."""
    from prefect import flow

    return flow(name=name, on_failure=[flow_failure_artifact], result_serializer=RESULTS)


def stage_task(name: str, backoff_factor: float = 30, retries: int = 2, **options: Any):
    """Prefect's @task with the stages' policy: `retries` retries after a jittered exponential backoff,
    for transient errors only (retry_transient), and a failure artifact. `options` go to @task too
    (e.g. cache_policy)."""
    from prefect import task
    from prefect.tasks import exponential_backoff

    return task(
        name=name,
        result_serializer=RESULTS,
        retries=retries,
        retry_delay_seconds=exponential_backoff(backoff_factor=backoff_factor),
        retry_jitter_factor=0.5,
        retry_condition_fn=retry_transient,
        on_failure=[task_failure_artifact],
        **options,
    )

"""A stage as its own process (`albert pretrain`, torchrun): its output streamed to the flow logs line
by line, a watchdog for its timeout, and a grace period to save its work when it is stopped.

    tail = stream_process(albert_command("pretrain", ...), logger().info, timeout_s=3600)

A process that exits non-zero raises StageProcessError with its last output lines (the retry policy,
flows/retry.py, reads its exit code; the failure artifact, flows/failure_artifacts.py, shows its tail).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable, Sequence

# How long a stage process may take to stop after SIGTERM before it is killed: `albert pretrain` finishes
# its step in flight and writes a checkpoint first (docs/trust-training.md), which takes a minute or
# more for a large model on a bucket.
STOP_GRACE_S = 300.0


class StageProcessError(RuntimeError):
    """A stage run as its own process failed; carries the tail of its output."""

    def __init__(self, cmd: Sequence[str], returncode: int, tail: list[str]):
        self.cmd, self.returncode, self.tail = list(cmd), returncode, tail
        how = f"killed by signal {-returncode}" if returncode < 0 else f"exit code {returncode}"
        super().__init__(f"`{' '.join(cmd[:4])} ...` failed ({how}); last lines:\n" + "\n".join(tail))


def albert_command(*args: str) -> list[str]:
    """`albert ARGS` through the running interpreter (works without the console script on PATH)."""
    return [sys.executable, "-m", "flows.cli", *args]


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

"""Run the real `albert` command and check what a user sees: the exit code, ONE line on stderr naming the
problem (never a traceback), and what is left on disk.

    r = albert("pretrain", "--instances", d, "--out", out)
    r.fails(2, "not the vocabulary")      # exit code 2, one error line containing the fragment
    assert tree(out) == before            # nothing of the user's changed

By default the command runs in this process: `flows.cli.main(args)`, the function the `albert` script
calls, with file descriptors 1 and 2 sent to files (so that what its Beam workers, torch and C++ print is
caught too), stdin from `stdin`, and os.environ, the working directory, signal handlers and torch's
thread count put back afterwards. An exception that escapes `main` is what the script would die of: exit 1
and its traceback on stderr. A process of its own (`process=True`) is for what only a process shows:
signals, memory limits, the interpreter's start-up (an `env` with PYTHONPATH), a command's hooks
(`launcher`), and the commands that run their own Prefect server (IN_A_PROCESS). Starting python, torch, TensorFlow, Beam and Prefect costs
several seconds a call, the behaviour under test usually far less.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import signal
import subprocess
import sys
import tempfile
import traceback
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAUNCHER = ("-m", "flows.cli")
# Commands that start a Prefect server or serve deployments of their own, with their own PREFECT_HOME:
# always a process of their own (in this one they would meet the test session's Prefect settings).
IN_A_PROCESS = frozenset({"demo", "ui", "deploy", "serve", "rehearse", "launch"})


@dataclass
class Result:
    args: tuple[str, ...]
    code: int
    out: str
    err: str

    def error_lines(self) -> list[str]:
        """stderr lines that are ours (`albert CMD: ...`) or look like a failure (Traceback, Error)."""
        return [line for line in self.err.splitlines() if line.strip()]

    def fails(self, code: int, *fragments: str) -> str:
        """Assert exit `code` and a one-line `albert CMD: error|failed: ...` message holding every
        fragment (case-insensitive); no traceback anywhere. Returns the line."""
        where = f"albert {' '.join(self.args)}\nexit {self.code}\nstderr:\n{self.err[-3000:]}"
        assert self.code == code, where
        assert "Traceback" not in self.err and "Traceback" not in self.out, where
        ours = [line for line in self.err.splitlines() if line.startswith(f"albert {self.args[0]}: ")]
        assert len(ours) == 1, where
        line = ours[0]
        for fragment in fragments:
            assert fragment.lower() in line.lower(), f"{fragment!r} not in {line!r}\n{where}"
        return line

    def ok(self) -> Result:
        assert self.code == 0, f"albert {' '.join(self.args)}\nexit {self.code}\n{self.err[-4000:]}"
        return self


def albert(
    *args: str,
    cwd: str | None = None,
    env: dict | None = None,
    timeout: int = 600,
    stdin: str | None = None,
    launcher: tuple[str, ...] = LAUNCHER,
    process: bool = False,
) -> Result:
    """`albert ARGS...` as a user runs it (from the repository root); `cwd`, `env`: the directory and the
    extra environment it runs with; `stdin`: text fed to it (UTF-8); `launcher`: another entry point
    (tests/trainer_hooks.py), which implies a process; `process`: a process of its own (see above);
    `timeout`: seconds, for a process only."""
    # PYTHONPATH is read when an interpreter starts (a sitecustomize shim: tests/faults/__init__.py).
    starts_python = launcher != LAUNCHER or "PYTHONPATH" in (env or {})
    if process or starts_python or (args and args[0] in IN_A_PROCESS):
        return _in_a_process(args, cwd, env, timeout, stdin, launcher)
    return _in_this_process(args, cwd, env, stdin)


def _in_a_process(args, cwd, env, timeout, stdin, launcher) -> Result:
    full_env = {**os.environ, "PYTHONPATH": ROOT, **(env or {})}
    full_env.pop("PYTEST_CURRENT_TEST", None)
    proc = run_bounded(
        [sys.executable, *launcher, *args], timeout, cwd=cwd or ROOT, env=full_env, stdin=stdin
    )
    return Result(tuple(args), proc.returncode, proc.stdout, proc.stderr)


def run_bounded(
    cmd: list[str], timeout: float, cwd=None, env: dict | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess:
    """subprocess.run(cmd, capture_output=True, text=True) in a session of its own, so that a timeout
    ends the whole tree it started (a Prefect server, torchrun's ranks, loader workers), not only its
    first process. Before the kill, SIGUSR1 asks every `albert` process of the tree for its threads'
    stacks (flows/cli.py registers faulthandler on it): the test fails with where each one hung."""
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(stdin if stdin is not None else "", timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGUSR1)
        try:
            out, err = proc.communicate(timeout=5)  # the stacks, as far as the tree writes them
        except subprocess.TimeoutExpired:
            out, err = "", ""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        more_out, more_err = proc.communicate()
        raise AssertionError(
            f"{' '.join(cmd)}: still running after {timeout:.0f} s; the process group was killed. "
            f"Its stacks and last output:\n{(out + more_out)[-4000:]}\n{(err + more_err)[-12000:]}"
        ) from None
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _in_this_process(args, cwd, env, stdin) -> Result:
    from flows import cli

    with tempfile.TemporaryDirectory(prefix="albert-cli-") as tmp, _restored_process_state():
        os.environ.update(env or {})
        os.chdir(cwd or ROOT)
        sys.stdin = io.TextIOWrapper(io.BytesIO((stdin or "").encode("utf-8")), encoding="utf-8")
        out, err = os.path.join(tmp, "out"), os.path.join(tmp, "err")
        with _fd_to_file(1, out), _fd_to_file(2, err):
            try:
                code = cli.main(list(args))
            except SystemExit as stop:  # argparse's exit 2; a command's sys.exit
                code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
                if stop.code is not None and not isinstance(stop.code, int):
                    print(stop.code, file=sys.stderr)
            except KeyboardInterrupt:  # Ctrl-C at pytest, not the command's (main handles its own)
                raise
            except BaseException:  # what `sys.exit(main())` would die of: exit 1 and the traceback
                traceback.print_exc()
                code = 1
        return Result(tuple(args), int(code or 0), _read(out), _read(err))


def _read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


@contextlib.contextmanager
def _fd_to_file(fd: int, path: str):
    """Descriptor `fd` (1 or 2) and its Python stream (sys.stdout or sys.stderr) write to `path` (opened
    for appending, so that both land in order) until the block ends."""
    name = {1: "stdout", 2: "stderr"}[fd]
    stream, saved = getattr(sys, name), os.dup(fd)
    with contextlib.suppress(Exception):
        stream.flush()
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(target, fd)
    os.close(target)
    # On the descriptor itself, never closed: a logging handler the command set up keeps this stream, and
    # after the block its writes go where the descriptor points again (pytest's capture), not to a closed file.
    raw = os.fdopen(fd, "wb", buffering=0, closefd=False)
    setattr(sys, name, io.TextIOWrapper(raw, encoding="utf-8", errors="backslashreplace", write_through=True))
    try:
        yield
    finally:
        setattr(sys, name, stream)
        os.dup2(saved, fd)
        os.close(saved)


@contextlib.contextmanager
def _restored_process_state():
    """What a command may change for the rest of its process, put back: the environment, the working
    directory, stdin, the SIGTERM/SIGINT handlers and torch's thread count."""
    environ, cwd, stdin = dict(os.environ), os.getcwd(), sys.stdin
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    torch = sys.modules.get("torch")
    threads = torch.get_num_threads() if torch is not None else None
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(environ)
        os.chdir(cwd)
        sys.stdin = stdin
        for s, handler in handlers.items():
            signal.signal(s, handler)
        torch = sys.modules.get("torch")
        if torch is not None:
            torch.set_num_threads(threads if threads is not None else torch.get_num_threads())


def tree(folder: str) -> dict[str, str]:
    """{relative path: sha256} of every file under `folder` (what is left on disk)."""
    out = {}
    for root, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, folder)] = hashlib.sha256(f.read()).hexdigest()
    return out


def flip_bit(path: str, offset: int | None = None) -> None:
    """Flip one bit of a file in place (the middle byte by default)."""
    with open(path, "r+b") as f:
        data = bytearray(f.read())
        i = len(data) // 2 if offset is None else offset
        data[i] ^= 0x01
        f.seek(0)
        f.write(data)


def truncate(path: str, keep: float = 0.5) -> None:
    """Cut a file to a fraction of its size, as a killed copy leaves it."""
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(int(size * keep))

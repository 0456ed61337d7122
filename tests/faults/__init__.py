"""Real faults for the CLI tests, and what a command leaves behind.

    mounts(path, "1m")           a tmpfs of that size at path: a disk that fills for real (ENOSPC);
                                 .resize("8m") frees space, .readonly() makes it read-only (EROFS)
    fault_env(tmp_path, rules)   env for `albert(..., env=...)` whose open() fails for writes of the
                                 paths a rule names: what root cannot be refused (EACCES) and a healthy
                                 device does not do (EIO). Worker processes get it too (PYTHONPATH).
    signal_when(args, ready, ...) `albert` in the background, signalled once `ready()` holds
    leftovers(folder)            what a command left in its folder, its own marker files aside

The mounts need root (the tests run as root); where mounting is not permitted the test is skipped, and
every mount is unmounted when the test ends, passed or not.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from tests.cli import ROOT, Result


class Tmpfs:
    def __init__(self, path: str):
        self.path = path

    def _mount(self, *options: str) -> None:
        subprocess.run(["mount", *options, self.path], check=True, capture_output=True)

    def resize(self, size: str) -> None:
        self._mount("-o", f"remount,size={size}")

    def readonly(self) -> None:
        self._mount("-o", "remount,ro")

    def unmount(self) -> None:
        subprocess.run(["umount", "-l", self.path], capture_output=True)


@pytest.fixture
def mounts():
    """mount(path, size) -> Tmpfs; skips the test where mounting is not permitted."""
    mounted: list[Tmpfs] = []

    def mount(path: str, size: str) -> Tmpfs:
        os.makedirs(path, exist_ok=True)
        try:
            subprocess.run(
                ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", path], check=True, capture_output=True
            )
        except (OSError, subprocess.CalledProcessError) as err:
            pytest.skip(f"cannot mount a tmpfs here ({err}): the full-disk tests need root")
        fs = Tmpfs(path)
        mounted.append(fs)
        return fs

    try:
        yield mount
    finally:
        for fs in reversed(mounted):
            fs.unmount()


SHIM = '''"""Test shim (tests/faults/__init__.py): open() for writing fails on the paths ALBERT_TEST_FAULTS names."""
import builtins, errno, fnmatch, json, os

_RULES = json.loads(os.environ.get("ALBERT_TEST_FAULTS", "[]"))
_open = builtins.open


def _open_with_faults(file, mode="r", *args, **kwargs):
    if isinstance(file, (str, bytes, os.PathLike)) and any(c in mode for c in "wax+"):
        path = os.path.abspath(os.fsdecode(file))
        for name, pattern in _RULES:
            if fnmatch.fnmatch(path, pattern):
                if name == "ValueError":  # not an OS error: a bug
                    raise ValueError(f"injected fault writing {path}")
                code = getattr(errno, name)
                raise OSError(code, os.strerror(code), path)
    return _open(file, mode, *args, **kwargs)


builtins.open = _open_with_faults
'''


def fault_env(tmp_path, rules: list[tuple[str, str]]) -> dict[str, str]:
    """Environment whose processes fail to open for writing any path matching a rule's glob (on the
    absolute path; `*` crosses folders), raising OSError(errno.NAME) ("ValueError": a bug instead)."""
    shim = tmp_path / "shim"
    shim.mkdir(exist_ok=True)
    (shim / "sitecustomize.py").write_text(SHIM)
    return {"PYTHONPATH": f"{shim}{os.pathsep}{ROOT}", "ALBERT_TEST_FAULTS": json.dumps(rules)}


def leftovers(folder: str) -> list[str]:
    """Every file and folder under `folder` but the stage's own marker files (`.albert-*`)."""
    out = []
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            rel = os.path.relpath(os.path.join(root, name), folder)
            if not rel.startswith(".albert-"):
                out.append(rel)
    return sorted(out)


def descendants(pid: int) -> list[int]:
    """Processes started by `pid`, and by them, ... (from /proc)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def alive(pids: list[int]) -> list[int]:
    """Those of `pids` still running (zombies count as gone)."""
    out = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                    out.append(pid)
        except OSError:
            pass
    return out


@dataclass
class Stopped:
    result: Result
    seconds: float  # from the signal to the exit
    workers: list[int]  # the processes it had started when signalled
    workers_left: list[int]  # of those, the ones still running after it exited


def signal_when(
    args: tuple[str, ...], ready: Callable[[], bool], signum: int, group: bool, tmp_path, timeout: float = 300
) -> Stopped:
    """Run `albert ARGS` in its own process group; once `ready()` holds, send `signum` to the process
    (as Kubernetes and Prefect do) or to its whole group (as Ctrl-C in a terminal does)."""
    out, err = open(tmp_path / "stdout", "w+"), open(tmp_path / "stderr", "w+")
    env = {**os.environ, "PYTHONPATH": ROOT}
    env.pop("PYTEST_CURRENT_TEST", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "flows.cli", *args],
        cwd=ROOT,
        env=env,
        stdout=out,
        stderr=err,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.time() + timeout
    while not ready():
        assert proc.poll() is None, "the command ended before the point to signal it at"
        assert time.time() < deadline, "the command did not reach the point to signal it at"
        time.sleep(0.02)
    workers = descendants(proc.pid)
    sent = time.time()
    if group:
        os.killpg(proc.pid, signum)
    else:
        proc.send_signal(signum)
    code = proc.wait(timeout=120)
    seconds = time.time() - sent
    time.sleep(0.5)  # a worker that outlives the launcher would still be there
    out.seek(0)
    err.seek(0)
    result = Result(tuple(args), code, out.read(), err.read())
    return Stopped(result, seconds, workers, alive(workers))


SIGNALS = {"SIGTERM": (signal.SIGTERM, False, 143), "SIGINT-group": (signal.SIGINT, True, 130)}

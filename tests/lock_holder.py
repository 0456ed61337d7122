"""A real process that holds a folder's lock (core.lock), for the tests of one writer per
folder: `hold(folder)` returns once it holds it; `kill9(proc)` kills it as kill -9 does."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.cli import ROOT

HOLD = """
import os, sys, time
from core import lock
held = lock.take(sys.argv[1], sys.argv[2])
if len(sys.argv) > 3:  # a child that outlives this process, as a loader worker can
    r, w = os.pipe()
    if os.fork() == 0:
        os.write(w, b"up")  # after the fork's hooks ran in the child
        time.sleep(600)
        os._exit(0)
    os.read(r, 2)
print("held", flush=True)
time.sleep(600)
"""


def hold(folder: str, stage: str = "corpus", fork: bool = False) -> subprocess.Popen:
    """A real process holding the lock of `folder` as `stage` (with `fork`, a forked child sleeps on)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, folder, stage, *(["fork"] if fork else [])],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": ROOT},
        start_new_session=True,
    )
    assert proc.stdout.readline().strip() == "held"
    return proc


def kill9(proc: subprocess.Popen) -> None:
    proc.kill()
    proc.wait()

"""core/address_space.py: a command under `ulimit -v` too small for it is refused in one line before
it loads anything or locks anything; memory that runs out during the work is one line too."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

from core import address_space
from tests.cli import ROOT, albert


def test_instances_under_400_mib_is_one_line_before_any_work(tmp_path, vocab_dir):
    """In a process of its own, as a user's shell runs it: before, this died of SIGABRT with nothing
    on stderr (a library failed to load) and left its output folder locked."""
    out = tmp_path / "inst"
    limit = 400 << 20

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, resource.RLIM_INFINITY))

    cmd = [sys.executable, "-m", "flows.cli", "instances", "--text", str(tmp_path / "t.txt"), "--vocab", vocab_dir, "--out", str(out)]  # fmt: skip
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, preexec_fn=limited, timeout=120)
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    line = done.stderr.strip()
    need = address_space.needs_mb("instances")
    assert line.startswith(
        "albert instances: error: the address space is limited to 400 MiB (ulimit -v 409600)"
    )
    assert f"needs about {need} MiB" in line and f"ulimit -v {need << 10}" in line and "--group-chars" in line
    assert not out.exists()  # not created, so not locked


def test_a_limit_above_the_need_or_none_lets_the_command_run(monkeypatch):
    monkeypatch.setattr(address_space, "limit_mb", lambda: None)
    address_space.check("instances")
    monkeypatch.setattr(address_space, "limit_mb", lambda: address_space.needs_mb("instances"))
    address_space.check("instances")
    monkeypatch.setattr(address_space, "limit_mb", lambda: 100)
    address_space.check("ui")  # not measured: never refused


def test_memory_that_runs_out_during_the_work_is_one_line(tmp_path, monkeypatch):
    """Beam hands on a worker's MemoryError as the text `MemoryError [while running 'STEP']`."""
    wrapped = RuntimeError("MemoryError [while running 'CreateInstances/WriteGroupFiles']")
    monkeypatch.setattr(address_space, "limit_mb", lambda: 1700)
    line = address_space.out_of_memory("instances", wrapped)
    assert line == (
        "out of memory in step 'CreateInstances/WriteGroupFiles': the work needed more than the address "
        "space limit of 1700 MiB (ulimit -v); lower --group-chars (characters a worker holds tokenized "
        "at once), or give it more memory"
    )
    assert address_space.out_of_memory("instances", RuntimeError("something else")) is None

    from pipelines.instances import cli as instances_cli

    def runs_out(args):
        raise RuntimeError("the pipeline failed") from MemoryError()

    monkeypatch.setattr(instances_cli, "run", runs_out)
    r = albert("instances", "--text", "t.txt", "--vocab", str(tmp_path), "--out", str(tmp_path / "i"))
    r.fails(1, "out of memory: the work needed more than the address space limit of 1700 MiB")
    assert os.listdir(tmp_path) == []

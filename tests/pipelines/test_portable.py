"""The portable path as a Flink or Spark run takes it: `albert corpus` and `albert instances` submitted
with `--runner PortableRunner` to Beam's own job server, the worker wheel staged through its artifact
service, the code run by SDK harness processes of an external worker pool (flows/rehearsal/portable.py); the
outputs are byte for byte the DirectRunner's. `albert rehearse` runs the same on the whole sample."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import zipfile

import pytest

from core.errors import UserError
from flows.rehearsal.portable import (
    check_worker_python,
    differing_files,
    local_portable,
    pool_env,
    python_shim,
)
from flows.server import port_open
from tests.cli import albert
from tests.pipelines.corpus.fixtures import write_sample_head

HEAD_LINES = 600  # the sample's first 600 paragraphs: about 100 articles
RUN_TIMEOUT = 300  # a worker that never connects would hold the client 300 s and more: fail instead


@pytest.fixture(scope="module")
def head(tmp_path_factory) -> str:
    return write_sample_head(str(tmp_path_factory.mktemp("sample-head") / "199801-head.txt"), HEAD_LINES)


def run_stages(out: str, source: str, vocab: str, flags: list[str]) -> dict[str, float]:
    """`albert corpus` then `albert instances` into out/corpus and out/instances; their wall seconds."""
    seconds = {}
    t0 = time.monotonic()
    albert("corpus", "--source", source, "--out", f"{out}/corpus", *flags, timeout=RUN_TIMEOUT).ok()
    seconds["corpus"] = time.monotonic() - t0
    t0 = time.monotonic()
    albert(
        "instances", "--corpus", f"{out}/corpus", "--vocab", vocab, "--out", f"{out}/instances", *flags,
        timeout=RUN_TIMEOUT,
    ).ok()  # fmt: skip
    seconds["instances"] = time.monotonic() - t0
    return seconds


# Slow (CI runs the slow tier): a job server, a worker pool, two Beam jobs each way. The rehearsal's
# test leaves this comparison to this test.
@pytest.mark.slow
def test_portable_runner_output_is_the_direct_runners(tmp_path, head, vocab_dir):
    source = f"peoples-daily:{head}"
    # The DirectRunner in this process (the same bytes in any mode; faster to start than 2 workers).
    direct = run_stages(str(tmp_path / "direct"), source, vocab_dir, ["--direct_running_mode", "in_memory"])
    with local_portable(str(tmp_path / "services")) as portable:
        through = run_stages(str(tmp_path / "portable"), source, vocab_dir, portable.flags)
        staged = portable.staged_wheels()
    assert not port_open(portable.job_port) and not port_open(portable.pool_port)  # both stopped
    print(f"wall s, DirectRunner: {direct}; PortableRunner (job server + external worker pool): {through}")

    for stage in ("corpus", "instances"):
        a, b = tmp_path / "direct" / stage, tmp_path / "portable" / stage
        assert differing_files(str(a), str(b)) == []
        assert len([n for n in os.listdir(b) if n.endswith((".jsonl.gz", ".tfrecord"))]) > 0
    # Both runs handed the job server the worker wheel, as for any runner that runs elsewhere: the same
    # files, byte for byte, as the wheel the pool's workers imported our code from.
    assert len(staged) == 2
    for path in staged:
        assert wheel_files(path) == wheel_files(portable.worker_wheel)


def wheel_files(path: str) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def test_worker_python_without_beam_is_refused(tmp_path):
    """The pool starts `python` from its PATH: one without Beam is refused before the pool starts
    (the client would otherwise wait for its worker until a gRPC deadline)."""
    from pipelines.corpus.staging import build_worker_wheel

    wheel = build_worker_wheel(str(tmp_path / "wheel"))
    env = pool_env(str(tmp_path), wheel)
    check_worker_python(env, str(tmp_path), wheel)  # this interpreter: fine

    # A `python` without site-packages: no Beam.
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    os.chmod(bare / "python", 0o755)
    env["PATH"] = f"{bare}{os.pathsep}{env['PATH']}"
    with pytest.raises(UserError, match="cannot run Beam workers: .*apache_beam"):
        check_worker_python(env, str(tmp_path), wheel)


def test_python_shim_runs_this_interpreter(tmp_path):
    folder = python_shim(str(tmp_path / "bin"))
    out = subprocess.run(
        [os.path.join(folder, "python"), "-c", "import sys; print(sys.executable, sys.prefix)"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert out.stdout.split() == [sys.executable, sys.prefix]  # the same virtualenv, not its base

"""SIGTERM to a 2-process CPU (gloo) DDP run under torchrun: the ranks agree on the step to stop at
(the stop votes ride on the step's all-reduce), save one checkpoint together, and the same torchrun
command resumes to the weights of an uninterrupted torchrun run, bit for bit.

Two senders: the torchrun agent's process group (how the pretrain flow and Prefect stop it: the agent
forwards SIGTERM to its workers), and one rank alone (`kill` of one worker): the rank that got the
signal decides for both."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from model import checkpoint as ckpt
from tests.model.train_fixtures import ROOT, cli_args, finished, start_group, stoppable
from tests.trainer_hooks import launcher

STEPS = 20
EXTRA = stoppable(STEPS)
PAUSE_AT = 6  # every rank pauses after step 6 (logged) until a signal reaches it, or for PAUSES[sender]
# A rank that gets no signal sleeps its pause out: rank 0 when rank 1 alone is signalled.
PAUSES = {"agent-group": 120.0, "rank-1-alone": 15.0}


def torchrun(args: list[str], hooks: tuple[str, ...] = ("-m", "flows.cli")) -> subprocess.Popen:
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        *hooks,
        *args,
    ]
    env = {**os.environ, "PYTHONPATH": ROOT, "OMP_NUM_THREADS": "1"}
    return start_group(cmd, env, stderr=subprocess.STDOUT)


def final_weights(run_dir: str) -> bytes:
    path = ckpt.latest(run_dir)
    assert path.endswith(f"step-{STEPS}"), path
    return open(os.path.join(path, "model.safetensors"), "rb").read()


@pytest.fixture(scope="module")
def reference(tmp_path_factory, instances_dir, model_config_file) -> bytes:
    out = str(tmp_path_factory.mktemp("ddp-reference") / "run")
    finished(torchrun(cli_args(instances_dir, out, model_config_file, *EXTRA)))
    return final_weights(out)


def rank_process(agent: int, rank: int) -> psutil.Process:
    for p in psutil.Process(agent).children():
        if p.environ().get("RANK") == str(rank):
            return p
    raise AssertionError(f"no rank {rank} under {agent}")


@pytest.mark.slow
@pytest.mark.parametrize("sender", list(PAUSES))
def test_ddp_ranks_agree_save_the_step_in_flight_and_resume_identical(
    tmp_path, instances_dir, model_config_file, reference, sender
):
    run_dir = str(tmp_path / "run")
    args = cli_args(instances_dir, run_dir, model_config_file, *EXTRA)
    proc = torchrun(args, launcher(sleep=(PAUSE_AT, PAUSES[sender])))
    metrics = os.path.join(run_dir, "metrics.jsonl")
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if os.path.exists(metrics) and f'"step": {PAUSE_AT},' in open(metrics).read():
            break
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()[0][-5000:]
    sent = time.monotonic()
    if sender == "agent-group":
        os.killpg(proc.pid, signal.SIGTERM)
    else:
        rank_process(proc.pid, 1).send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=300)
    seconds = time.monotonic() - sent

    stopped = PAUSE_AT + 1
    saved = ckpt.step_dir(run_dir, stopped)
    lines = [line for line in out.splitlines() if line.startswith("albert pretrain: ")]
    expected = (
        f"albert pretrain: interrupted: SIGTERM at step {stopped}: saved {saved}; rerun the same command"
    )
    assert lines and all(line.startswith(expected) for line in lines), out[-5000:]
    if sender == "agent-group":  # one line per rank
        assert len(lines) == 2, out[-5000:]
    # With rank 1 alone signalled, the agent sees it exit 143 and SIGTERMs rank 0 itself, which may land
    # after rank 0 saved and before it printed its line.
    assert ckpt.list_steps(run_dir) == [stopped]
    state = json.load(open(os.path.join(saved, "trainer.json")))
    assert state["world_size"] == 2 and [r["rank"] for r in state["ranks"]] == [0, 1]
    print(f"\nDDP, SIGTERM to {sender}: both ranks saved step {stopped}; torchrun exited {proc.returncode} "
          f"{seconds:.2f} s after the signal")  # fmt: skip

    again = finished(torchrun(args))
    assert f"resumed from {saved} (step {stopped})" in again
    assert final_weights(run_dir) == reference  # bit-exact

"""A pretraining job of 2 nodes on 127.0.0.1 (`albert launch`: two torchrun agents, c10d rendezvous,
gloo, 1 process each), the two nodes sharing this host's cores as the issue ran them:

- it trains as one job: the rendezvous id is the run folder's name, and the host's cores are shared
  by its 2 ranks (each node's launcher sets threads from all of them; each rank caps itself);
- a node lost mid-run (its worker and its agent killed, after a checkpoint) and started again
  rejoins: the surviving agent restarts its worker (an elastic restart), both resume from the last
  checkpoint, and the job ends with the weights of the uninterrupted 2-node run, bit for bit, with
  dropout on (each rank's RNG state is in the checkpoint).

Also the launcher's command line, thread rule and refusals, and the flow's command for several ranks.

`python -m tests.model.test_multinode --pause-after STEP --paused-file PATH pretrain ...` is `albert`
whose trainer stops after step STEP (saved if due) and waits there to be killed: the node to lose."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import psutil
import pytest

from model import checkpoint as ckpt
from model import launch
from tests.model.train_fixtures import ROOT, cli_args

STEPS, SAVE_EVERY, PAUSE_AFTER = 8, 2, 4
EXTRA = ("--steps", str(STEPS), "--save-every", str(SAVE_EVERY), "--set", "hidden_dropout_prob=0.1")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def base_env() -> dict[str, str]:
    """The environment of a node: threads left to the launcher."""
    env = {**os.environ, "PYTHONPATH": ROOT}
    env.pop("OMP_NUM_THREADS", None)
    return env


def start_node(cmd: list[str], env: dict[str, str]) -> subprocess.Popen:
    """A node: `cmd` in its own session, its output piped."""
    return subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def launch_cmd(port: int, args: list[str]) -> list[str]:
    return [sys.executable, "-m", "flows.cli", "launch", "--nnodes", "2", "--nproc-per-node", "1",
            "--rdzv-endpoint", f"127.0.0.1:{port}", "--join-timeout", "120", *args]  # fmt: skip


def wait_listening(port: int, proc: subprocess.Popen, timeout_s: float = 120) -> None:
    """Until the first node hosts the rendezvous store (so that it, not the node to lose, holds it)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[0][-5000:]
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError("the first node never hosted the rendezvous store")


def two_node_job(args: list[str]) -> str:
    """Both nodes of an uninterrupted job; their merged output."""
    port = free_port()
    first = start_node(launch_cmd(port, args), base_env())
    wait_listening(port, first)
    second = start_node(launch_cmd(port, args), base_env())
    outs = [p.communicate(timeout=600)[0] for p in (first, second)]
    assert first.returncode == 0 and second.returncode == 0, outs[0][-4000:] + outs[1][-4000:]
    return "".join(outs)


@pytest.fixture(scope="module")
def reference(tmp_path_factory, instances_dir, model_config_file) -> tuple[str, str]:
    """An uninterrupted 2-node job: (its run folder, its output)."""
    run_dir = str(tmp_path_factory.mktemp("multinode") / "runs" / "two-nodes")
    return run_dir, two_node_job(cli_args(instances_dir, run_dir, model_config_file, *EXTRA))


def final_weights(run_dir: str) -> bytes:
    path = ckpt.latest(run_dir)
    assert path.endswith(f"step-{STEPS}"), path
    return open(os.path.join(path, "model.safetensors"), "rb").read()


# ------------------------------------------------------------------ the launcher, without processes


def test_torchrun_command_of_a_node(monkeypatch):
    monkeypatch.delenv(launch.RDZV_ENV, raising=False)
    nodes = launch.NodesConfig(
        nnodes=4, nproc_per_node=8, rdzv_endpoint="10.0.0.2:29400", shutdown_timeout=285
    )
    cmd = launch.torchrun_argv(nodes, launch.run_name("gs://b/albert/runs/0123abcd/"), ["pretrain", "--x"])
    assert cmd[1:] == [
        "-m", "torch.distributed.run", "--nproc_per_node=8", "--max_restarts=3", "--shutdown-timeout=285",
        "--nnodes=4", "--rdzv_backend=c10d", "--rdzv_endpoint=10.0.0.2:29400", "--rdzv_id=0123abcd",
        "--rdzv_conf=join_timeout=600", "-m", "flows.cli", "pretrain", "--x",
    ]  # fmt: skip
    one = launch.torchrun_argv(launch.NodesConfig(nproc_per_node=2), "r", ["pretrain"])
    assert "--standalone" in one and not any(a.startswith("--rdzv") for a in one)

    from core.errors import UserError

    with pytest.raises(UserError, match="--nnodes 2 needs --rdzv-endpoint"):
        launch.NodesConfig(nnodes=2).check()
    monkeypatch.setenv(launch.RDZV_ENV, "h:1")
    launch.NodesConfig(nnodes=2).check()  # the endpoint from the environment
    assert "--rdzv_endpoint=h:1" in launch.torchrun_argv(launch.NodesConfig(nnodes=2), "r", [])


def test_threads_per_rank_from_the_node_cores_unless_set(monkeypatch):
    monkeypatch.setattr(launch, "node_cores", lambda: 16)
    assert launch.thread_env(1, {}) == {"OMP_NUM_THREADS": "16"}
    assert launch.thread_env(8, {}) == {"OMP_NUM_THREADS": "2"}
    assert launch.thread_env(32, {}) == {"OMP_NUM_THREADS": "1"}
    assert launch.thread_env(8, {"OMP_NUM_THREADS": "3"}) == {}  # the user's choice stands
    assert launch.node_env(2, {}) == {"OMP_NUM_THREADS": "8", launch.NO_SHARED_STORE: "1"}


def test_bad_launches_stop_before_any_node_starts(tmp_path, monkeypatch, capsys, instances_dir):
    from flows.cli import main

    monkeypatch.delenv(launch.RDZV_ENV, raising=False)
    pretrain = ["pretrain", "--instances", instances_dir, "--out", str(tmp_path / "run")]
    assert main(["launch", "--nnodes", "2", *pretrain]) == 2
    assert "albert launch: error: --nnodes 2 needs --rdzv-endpoint HOST:PORT" in capsys.readouterr().err
    assert main(["launch", "--max-restarts", "-1", *pretrain]) == 2
    with pytest.raises(SystemExit) as stopped:  # argparse: a pretrain option that does not exist
        main(["launch", "--nproc-per-node", "2", *pretrain, "--no-such-option"])
    assert stopped.value.code == 2 and "unrecognized arguments: --no-such-option" in capsys.readouterr().err
    assert main(["launch", "--nproc-per-node", "2", *pretrain, "--steps", "0"]) == 2  # TrainConfig.check
    assert "--steps and --batch-size must be >= 1" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "run")


def test_the_flow_launches_several_ranks_through_albert_launch(tmp_path, monkeypatch, instances_dir):
    from flows.pretrain import _nodes_problem, trainer_command
    from model.train_config import TrainConfig

    cfg = TrainConfig.from_flat(instances=instances_dir, out=str(tmp_path / "runs" / "k3y"))
    cmd = trainer_command(cfg, nproc_per_node=1, nnodes=2, stop_grace_s=300)
    assert cmd[1:10] == ["-m", "flows.cli", "launch", "--nnodes", "2", "--nproc-per-node", "1",
                         "--shutdown-timeout", "285"]  # fmt: skip
    assert cmd[10:13] == ["pretrain", "--instances", instances_dir]
    assert trainer_command(cfg, 1, 1)[3] == "pretrain"  # one process: no torchrun
    monkeypatch.delenv(launch.RDZV_ENV, raising=False)
    assert "ALBERT_RDZV_ENDPOINT" in _nodes_problem(2) and _nodes_problem(1) is None


# ------------------------------------------------------------------------- two nodes on 127.0.0.1


def test_two_nodes_train_as_one_job(reference):
    run_dir, out = reference
    assert "--rdzv_id=two-nodes" in out and "2 rank(s) x 1 micro-batch(es) of 4 = batch 8" in out
    cores = len(os.sched_getaffinity(0))
    assert out.count(f"albert launch: OMP_NUM_THREADS={cores} ") == 2, out[-3000:]  # each node: all cores
    if cores > 1:  # which its 2 ranks share
        assert (
            out.count(f"ranks share the {cores} cores of {socket.gethostname()}: {cores // 2} thread(s)") == 2
        )
    state = ckpt.load(ckpt.latest(run_dir)).trainer
    assert state["step"] == STEPS and state["world_size"] == 2


# Slow: the fast suite keeps two nodes training as one job (above).
@pytest.mark.slow
def test_a_lost_node_rejoins_and_the_job_ends_as_if_uninterrupted(
    tmp_path, instances_dir, model_config_file, reference
):
    run_dir = str(tmp_path / "runs" / "lost")
    args = cli_args(instances_dir, run_dir, model_config_file, *EXTRA)
    port, paused = free_port(), str(tmp_path / "paused")
    survivor = start_node(launch_cmd(port, args), base_env())
    wait_listening(port, survivor)
    # The node to lose: the same launch, its trainer stopping after step PAUSE_AFTER until it is killed.
    nodes = launch.NodesConfig(nnodes=2, rdzv_endpoint=f"127.0.0.1:{port}", join_timeout=120)
    hooks = ("-m", "tests.model.test_multinode", "--pause-after", str(PAUSE_AFTER), "--paused-file", paused)
    env = {**base_env(), **launch.node_env(1, {})}
    lost = start_node(launch.torchrun_argv(nodes, "lost", args, entry=hooks), env)
    deadline = time.monotonic() + 300
    while not os.path.exists(paused):
        assert time.monotonic() < deadline and lost.poll() is None and survivor.poll() is None
        time.sleep(0.1)
    assert ckpt.list_steps(run_dir)[-1] == PAUSE_AFTER  # checkpointed, then lost
    survivor_worker = psutil.Process(survivor.pid).children()[0]
    for p in [*psutil.Process(lost.pid).children(recursive=True), psutil.Process(lost.pid)]:
        p.send_signal(signal.SIGKILL)  # the node's worker and its agent
    lost.communicate(timeout=60)
    survivor_worker.wait(timeout=300)  # its collective failed: the agent restarts it, and waits
    back = start_node(launch_cmd(port, args), base_env())

    outs = [p.communicate(timeout=600)[0] for p in (survivor, back)]
    log = "\n".join(outs)
    assert survivor.returncode == 0 and back.returncode == 0, outs[0][-4000:] + outs[1][-4000:]
    # The surviving agent's worker failed, and yet the agent ended 0: it restarted its worker.
    assert "failed (exitcode: 1) local_rank: 0" in outs[0], outs[0][-4000:]
    assert f"resumed from {ckpt.step_dir(run_dir, PAUSE_AFTER)} (step {PAUSE_AFTER})" in log, log[-4000:]
    assert final_weights(run_dir) == final_weights(reference[0])  # bit-exact, dropout on
    print(f"\n2 nodes: node 1 lost after step {PAUSE_AFTER} (checkpoint step-{PAUSE_AFTER}), its worker and "
          f"agent killed; node 0's agent restarted its worker; node 1 restarted and rejoined; resumed at step "
          f"{PAUSE_AFTER}, ended at step {STEPS}, model.safetensors identical to the uninterrupted 2-node run")  # fmt: skip


def _paused_albert(argv: list[str]) -> int:
    """`albert ARGV[4:]` whose trainer waits after step ARGV[1] (ARGV: --pause-after N --paused-file P ...)."""
    from flows.cli import main
    from model.trainer import Trainer

    step, marker, rest = int(argv[1]), argv[3], argv[4:]
    inner = Trainer.train_step

    def train_step(self, micro_batches):
        if self.step == step:
            open(marker, "w").close()
            time.sleep(3600)  # until killed
        return inner(self, micro_batches)

    Trainer.train_step = train_step
    return main(rest)


if __name__ == "__main__":
    sys.exit(_paused_albert(sys.argv[1:]))

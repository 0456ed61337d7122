"""`albert launch`: this node's part of a pretraining job of N nodes, under torchrun, elastic.

Run the same command on every node of the job (a Kubernetes indexed Job, a Vertex AI multi-replica
pool, ssh or srun start the N copies); the run folder must be one that every node reaches (gs://):

    albert launch --nnodes 2 --nproc-per-node 8 --rdzv-endpoint HOST:29400 \
        pretrain --instances gs://B/instances --out gs://B/runs/ID [pretrain options]

It checks the pretrain options, then becomes (exec) `python -m torch.distributed.run` with:

- c10d rendezvous at --rdzv-endpoint (default: $ALBERT_RDZV_ENDPOINT). The first agent that starts on
  the host it names hosts the rendezvous store: that node must stay up (losing it ends the job, and
  the pretrain flow's retry resumes it);
- --rdzv-id: the run folder's name unless given (the pretrain flow's run key, `runs/<key>`), so the
  nodes of one run meet and those of another run at the same endpoint do not;
- --max-restarts (3): when a rank fails (a node lost, a process killed), the surviving agents stop
  their workers and meet again; a lost node's agent, restarted, rejoins (within --join-timeout), and
  the new workers resume from the run's last checkpoint (the trainer resumes on its own). The number
  of nodes is fixed (min = max = --nnodes): a checkpoint continues only at the world size that wrote it;
- OMP_NUM_THREADS = the node's cores (those this process may run on) // --nproc-per-node, at least 1,
  unless it is set (and when several agents share a host, each rank caps its threads at the host's
  cores // ranks on the host: model/distributed.py, share_cores);
- one rendezvous store per round (NO_SHARED_STORE, below), without which a node that rejoins fails.

One node (--nnodes 1) needs no endpoint: torchrun --standalone (a rendezvous on a free local port).
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass

from core import config_cli
from core.config_cli import opt
from core.errors import UserError
from model.cores import node_cores

RDZV_ENV = "ALBERT_RDZV_ENDPOINT"
COMMANDS = ("pretrain",)  # what runs on every rank: `albert COMMAND ...`


@dataclass
class NodesConfig:
    nnodes: int = opt(1, "nodes in the job (fixed: every one must join)")
    nproc_per_node: int = opt(1, "ranks per node (GPUs per node; CPU: processes)")
    rdzv_endpoint: str | None = opt(None, f"HOST:PORT of the rendezvous (default: ${RDZV_ENV})")
    rdzv_id: str | None = opt(None, "the job's rendezvous id (default: the run folder's name)")
    max_restarts: int = opt(3, "times the workers are restarted after a rank fails or a node is lost")
    join_timeout: int = opt(600, "seconds the nodes wait for each other at a (re)start")
    shutdown_timeout: int | None = opt(None, "seconds the agent waits for its workers after SIGTERM")

    def check(self) -> None:
        if self.nnodes < 1 or self.nproc_per_node < 1:
            raise UserError("--nnodes and --nproc-per-node must be >= 1")
        if self.max_restarts < 0 or self.join_timeout < 1:
            raise UserError("--max-restarts must be >= 0 and --join-timeout >= 1")
        if self.nnodes > 1 and not self.endpoint():
            raise UserError(f"--nnodes {self.nnodes} needs --rdzv-endpoint HOST:PORT (or ${RDZV_ENV})")

    def endpoint(self) -> str | None:
        return self.rdzv_endpoint or os.environ.get(RDZV_ENV) or None


def thread_env(nproc_per_node: int, environ: dict[str, str] | None = None) -> dict[str, str]:
    """{"OMP_NUM_THREADS": cores // ranks per node, at least 1}, or {} when the user set it."""
    environ = os.environ if environ is None else environ
    if environ.get("OMP_NUM_THREADS"):
        return {}
    return {"OMP_NUM_THREADS": str(max(1, node_cores() // nproc_per_node))}


# torch >= 2.4 lets the workers share the rendezvous agent's TCP store, and builds the address of
# that store once per agent: after an elastic restart, an agent that stayed rank 0 publishes none for
# the new round, and a node that rejoined waits for it until it times out (measured with torch 2.13:
# the restarted job failed after 60 s). Without sharing, every round publishes its own.
NO_SHARED_STORE = "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"


def node_env(nproc_per_node: int, environ: dict[str, str] | None = None) -> dict[str, str]:
    """What the launcher adds to a node's environment: threads per rank, one store per round."""
    environ = os.environ if environ is None else environ
    return {**thread_env(nproc_per_node, environ), NO_SHARED_STORE: environ.get(NO_SHARED_STORE, "1")}


def run_name(out: str) -> str:
    """The rendezvous id of a run: its folder's name (`runs/<key>` -> key)."""
    name = out.rstrip("/").rsplit("/", 1)[-1]
    if not name:
        raise UserError(f"--out {out!r} has no folder name to use as the rendezvous id; give --rdzv-id")
    return name


def torchrun_argv(
    nodes: NodesConfig, rdzv_id: str, args: list[str], entry: tuple[str, ...] = ("-m", "flows.cli")
) -> list[str]:
    """`python -m torch.distributed.run [launch flags] ENTRY ARGS` for this node's agent."""
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nodes.nproc_per_node}"]
    cmd.append(f"--max_restarts={nodes.max_restarts}")
    if nodes.shutdown_timeout is not None:
        cmd.append(f"--shutdown-timeout={max(1, nodes.shutdown_timeout)}")
    if nodes.nnodes == 1:
        cmd.append("--standalone")
    else:
        cmd += [
            f"--nnodes={nodes.nnodes}",
            "--rdzv_backend=c10d",
            f"--rdzv_endpoint={nodes.endpoint()}",
            f"--rdzv_id={rdzv_id}",
            f"--rdzv_conf=join_timeout={nodes.join_timeout}",
        ]
    return cmd + [*entry, *args]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    config_cli.add_arguments(parser, NodesConfig)
    parser.add_argument("command", choices=COMMANDS, help="what every rank runs: albert COMMAND ...")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="its options (albert pretrain --help)")


def pretrain_out(args: list[str]) -> str:
    """The --out of `albert pretrain ARGS`, after the pretrain options are checked as the trainer
    would check them (before N nodes start for nothing)."""
    from model import pretrain_command
    from model.train_config import TrainConfig

    parser = argparse.ArgumentParser(prog="albert pretrain")
    pretrain_command.add_arguments(parser)
    cfg = config_cli.from_args(TrainConfig, parser.parse_args(args))
    if not cfg.out.strip():
        raise UserError("--out is empty; give the run folder")
    cfg.check()
    return cfg.out


def run(args: argparse.Namespace) -> int:
    nodes = config_cli.from_args(NodesConfig, args)
    nodes.check()
    out = pretrain_out(args.args)
    rdzv_id = nodes.rdzv_id or run_name(out)
    cmd = torchrun_argv(nodes, rdzv_id, [args.command, *args.args])
    env = {**os.environ, **node_env(nodes.nproc_per_node)}
    print(f"albert launch: OMP_NUM_THREADS={env.get('OMP_NUM_THREADS')} {' '.join(cmd)}", flush=True)
    os.execve(cmd[0], cmd, env)  # this process becomes the node's torchrun agent (signals go to it)
    return 0  # pragma: no cover - execve does not return

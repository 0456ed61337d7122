"""Process groups and model wrapping for data parallelism: DDP (default) or FSDP2 (`fully_shard`).

Launch with torchrun; a plain `python` / `albert pretrain` run is a world of one and wraps nothing:

    torchrun --nproc_per_node 8 -m flows.cli pretrain ... [--parallel fsdp]
    python -m torch.distributed.run --nproc_per_node 2 -m flows.cli pretrain ...   (CPU: gloo)

The model stays single-device code (model/albert.py); wrapping happens here, from outside.

- DDP: gradients all-reduced (averaged) in backward; with gradient accumulation the first micro-batches
  run under `no_sync()`.
- FSDP2: `fully_shard` on the whole model (one unit: parameters, gradients and optimizer state sharded
  across ranks, all-gathered for forward/backward). ALBERT's layers share one group of parameters that
  runs L times per forward, so per-layer units (the usual FSDP recipe) do not apply; the embedding
  table and the shared group are small next to the optimizer state it shards (xxlarge: 223M parameters,
  2.7 GB of fp32 weights + Adam/LAMB moments, split N ways).
The trainer normalises the loss by the GLOBAL number of predictions and sequences of the step, so the
averaged gradient equals that of one big batch whatever the number of ranks or micro-batches.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn as nn

from core.errors import UserError


@dataclass(frozen=True)
class Dist:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def init(device_type: str) -> Dist:
    """Join the process group torchrun describes (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT) or
    return a world of one. NCCL on CUDA, gloo otherwise. On XLA the group is gloo too: it carries the
    host's figures (counts, stop votes, objects), never an XLA tensor; gradients are averaged by
    `xla_gradient_mean`."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return Dist()
    rank, local = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    if not dist.is_initialized():
        backend = "nccl" if device_type == "cuda" else "gloo"
        if device_type == "cuda":
            torch.cuda.set_device(local)
        dist.init_process_group(backend, timeout=datetime.timedelta(minutes=30))
    d = Dist(rank, world, local)
    share_cores(d)
    return d


def share_cores(d: Dist) -> None:
    """Ranks of several torchrun agents on one host (nodes tried out on one machine, or packed onto
    one): each agent sets threads from all the host's cores for its own ranks (model/launch.py), so
    together they ask for more threads than there are cores (measured: 2 nodes on 127.0.0.1 with 2
    cores ran 4 threads, at a fifth to a tenth of the speed). Cap each rank at cores // ranks on its host."""
    import socket

    from model.cores import node_cores

    hosts = all_gather_objects(socket.gethostname(), d)
    here = hosts.count(hosts[d.rank])
    if here <= int(os.environ.get("LOCAL_WORLD_SIZE", "1")):  # one agent on this host
        return
    threads = max(1, node_cores() // here)
    if threads < torch.get_num_threads():
        print(
            f"rank {d.rank}: {here} ranks share the {node_cores()} cores of {hosts[d.rank]}: "
            f"{threads} thread(s) each, not {torch.get_num_threads()}",
            file=sys.stderr,
            flush=True,
        )
        torch.set_num_threads(threads)


def shutdown() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def barrier(d: Dist) -> None:
    if d.enabled:
        dist.barrier()


def all_reduce_sum(t: torch.Tensor, d: Dist) -> torch.Tensor:
    if d.enabled:
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t


def all_gather_objects(obj, d: Dist) -> list:
    if not d.enabled:
        return [obj]
    out = [None] * d.world_size
    dist.all_gather_object(out, obj)
    return out


def broadcast_object(obj, d: Dist):
    if not d.enabled:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def on_main(fn, d: Dist) -> None:
    """Run `fn` on the main rank only (e.g. claiming the run folder). A UserError there is raised on
    every rank, so no rank waits forever at the next collective for one that has stopped."""
    error = None
    if d.is_main:
        try:
            fn()
        except UserError as err:
            error = str(err)
    error = broadcast_object(error, d)
    if error is not None:
        raise UserError(error)


def wrap(model: nn.Module, d: Dist, mode: str, device: torch.device) -> nn.Module:
    """The module to run forward/backward through: the model itself (world of one; XLA, whose
    gradients `xla_gradient_mean` averages), DDP, or the model after fully_shard (FSDP2 shards it in
    place)."""
    if not d.enabled or device.type == "xla":
        return model
    if mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        ids = [device.index] if device.type == "cuda" else None
        return DDP(model, device_ids=ids)
    if mode == "fsdp":
        return shard(model, d.world_size, device)
    raise UserError(f"unknown --parallel {mode!r}; expected ddp or fsdp")


def xla_gradient_mean(d: Dist, device: torch.device, cut_graph) -> Callable[[list[torch.Tensor]], None]:
    """What averages the gradients across ranks on XLA, where DDP does not run (a no-op elsewhere).

    - The XLA runtime spans the processes (a TPU slice): an all-reduce on the device, inside the step's
      first graph (model.tpu.all_reduce_mean).
    - Each process has a runtime of its own (XLA's CPU device; measured with torch_xla 2.9: its `xla`
      process group then "all-reduces" each process's tensors alone, silently): through the host,
      over the gloo group. The step's graph is cut first (forward and backward run once), the
      gradients are read as one flat tensor, summed across ranks, divided by the world size and
      copied back. A host round trip per step, but the same average as DDP's.
    Anything else (a runtime spanning some of the processes) is refused."""
    if not d.enabled or device.type != "xla":
        return lambda grads: None
    from model.tpu import all_reduce_mean, runtime_world_size

    spans = runtime_world_size()
    if spans == d.world_size:
        return lambda grads: all_reduce_mean(grads, d.world_size)
    if spans != 1:
        raise UserError(
            f"the XLA runtime spans {spans} processes, torchrun started {d.world_size}: launch one "
            "process per XLA device of the runtime (docs/tpu.md)"
        )

    def through_host(grads: list[torch.Tensor]) -> None:
        cut_graph()  # forward and backward, run once: the read below must not trace them again
        flat = torch.cat([g.reshape(-1) for g in grads]).cpu()  # (sum of numels,) fp32 on the host
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        flat = (flat / d.world_size).to(device)
        for g, piece in zip(grads, flat.split([g.numel() for g in grads])):
            g.copy_(piece.view_as(g))

    return through_host


# FSDP2 warns when a sharded module returns a view that requires grad: an in-place op on it (`out +=
# y`) would drop the hook that all-gathers the weights before backward. Ours is mlm_logits (B, P, V),
# which F.linear returns as a view of its (B*P, V) product. Nothing changes an output in place: the
# trainer reads the losses and the detached counts, evaluation reads under no_grad. So the hooks run,
# and the gradients are those of the unsharded model (tests/model/test_multinode_fsdp.py).
VIEW_WARNING = r"FSDP2-wrapped module \(FSDPAlbertForPreTraining\) returned a view tensor"


def shard(model: nn.Module, world_size: int, device: torch.device) -> nn.Module:
    """FSDP2: fully_shard the whole model over `world_size` ranks (in place); the model."""
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError as err:  # pragma: no cover - torch < 2.6
        raise UserError(f"FSDP2 needs torch.distributed.fsdp.fully_shard (torch >= 2.6): {err}") from err
    from torch.distributed.device_mesh import init_device_mesh

    warnings.filterwarnings("ignore", message=VIEW_WARNING, category=UserWarning)
    mesh = init_device_mesh(device.type, (world_size,))
    fully_shard(model, mesh=mesh)
    return model


def no_sync(wrapped: nn.Module, active: bool):
    """Skip DDP's gradient all-reduce for all but the last micro-batch (FSDP2: skip the reduce-scatter)."""
    if not active:
        return contextlib.nullcontext()
    if hasattr(wrapped, "no_sync"):
        return wrapped.no_sync()
    if hasattr(wrapped, "set_requires_gradient_sync"):  # FSDP2

        @contextlib.contextmanager
        def _fsdp():
            wrapped.set_requires_gradient_sync(False)
            try:
                yield
            finally:
                wrapped.set_requires_gradient_sync(True)

        return _fsdp()
    return contextlib.nullcontext()

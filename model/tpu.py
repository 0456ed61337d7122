"""Optional TPU backend (torch_xla, PJRT runtime) behind the trainer's interface: `--device tpu`.

Tested on XLA's CPU device (tests/tpu/, `make test-tpu`): pretraining, its compile count, resume, two
processes as one job, evaluation, fine-tuning, checkpoints crossing to the eager CPU trainer. Not run
on TPU hardware (none is reachable from this project's machines): speed, memory, libtpu, several
hosts, and the on-device gradient all-reduce across processes are unchecked (docs/tpu.md).
Imported by the trainer everywhere, but torch_xla is imported only when `--device tpu` is asked for;
everything else runs without torch_xla installed.
torch_xla has no release for the main set's torch (2.13): it runs in `.venv-tpu` (`make setup-tpu`,
constraints-tpu.txt: torch 2.9 + torch_xla 2.9), where `PJRT_DEVICE=CPU` gives XLA's CPU device, which
traces, compiles and runs the same lazy graphs as a TPU.

What changes on XLA (the trainer calls these functions and nothing else):
- `xla_device()`: the XLA device of this process (PJRT_DEVICE=TPU or CPU selects the runtime); under
  torchrun, each local process gets its share of the host's chips first.
- `graph_cut(device)`: what the step calls where a traced graph must end: `mark_step` on XLA, nothing
  elsewhere. The step cuts twice: after forward, backward and gradient clipping (then it reads the
  losses and the norm on the host: they decide whether the update is applied), and after the update.
  Each is compiled on the first steps, then replayed: 3 graphs in all (torch_xla passes the lr as a
  device scalar, except 0, a constant: the warmup's first update is a graph of its own).
- `runtime_world_size()` / `all_reduce_mean()`: gradients averaged across processes on the device
  where the runtime spans them (model.distributed.xla_gradient_mean; through the host otherwise).
- `length_multiple(device)`: fine-tuning pads batches to a multiple of 32 tokens on XLA (a few shapes).
- `rng_state()` / `set_rng_state(seed)`: XLA's own random generator (dropout), which
  `torch.manual_seed` does not reach: seeded by `model.device.manual_seed`, saved with checkpoints.
- `compilations()`: how many graphs XLA compiled in this process (torch_xla's CompileTime metric).

Shapes are static (fixed L and P in the TFRecords, every micro-batch of the same size: the pretraining
stream runs on across epochs and never yields a short batch), which XLA needs not to recompile. The step's loss
normalisers are read off the host batches before they move to the device (no device-to-host read
inside a graph), so the batches stay on the host until the step (no MpDeviceLoader). bf16: `--precision
auto` is bf16 autocast on XLA as on CUDA (weights and optimizer state stay fp32).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

import torch

from core.errors import UserError


def _xla():
    try:
        import torch_xla.core.xla_model as xm
    except ImportError as err:
        raise UserError(
            "--device tpu needs torch_xla, which needs torch 2.9: `make setup-tpu` makes .venv-tpu "
            f"(docs/tpu.md): {err}"
        ) from err
    return xm


_topology_set = False


def xla_device() -> torch.device:
    """This process's XLA device. Under torchrun with several local processes, first what torch_xla's
    `xla://` rendezvous does there: the process's share of the host's TPU chips (one each: TPU_VISIBLE_CHIPS,
    process bounds and ports, from LOCAL_RANK / LOCAL_WORLD_SIZE), before the runtime starts; on XLA's
    CPU device it only records the local rank and count. The process group stays gloo
    (model/distributed.py)."""
    global _topology_set
    _xla()
    import torch_xla

    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    if local_world > 1 and not _topology_set:
        from torch_xla._internal import pjrt

        pjrt.initialize_multiprocess(int(os.environ.get("LOCAL_RANK", "0")), local_world)
        _topology_set = True
    return torch_xla.device()


def graph_cut(device: torch.device) -> Callable[[], None]:
    """The call that ends a traced graph on `device`: torch_xla's mark_step on XLA, a no-op elsewhere."""
    if device.type != "xla":
        return lambda: None
    return _xla().mark_step


def rng_state() -> int | None:
    """The seed of XLA's random generator (dropout on the device), or None where torch_xla is not
    loaded. torch's CPU generator does not drive it: checkpoints carry it apart (model/train_state.py)."""
    if "torch_xla" not in sys.modules:
        return None
    return int(_xla().get_rng_state())


def set_rng_state(seed: int) -> None:
    _xla().set_rng_state(seed)


# Fine-tuning pads each batch to its longest item; on XLA every new length would compile a new graph, so
# lengths are rounded up to a multiple of this: at most max_seq_length / 32 shapes per batch size.
XLA_LENGTH_MULTIPLE = 32


def length_multiple(device) -> int:
    """What a batch's padded length is rounded up to on `device`: XLA_LENGTH_MULTIPLE on XLA, 1 (the
    longest item, the least padding) elsewhere."""
    return XLA_LENGTH_MULTIPLE if torch.device(device).type == "xla" else 1


def runtime_world_size() -> int:
    """How many processes the XLA runtime itself spans (1 where each process has a runtime of its own,
    as on XLA's CPU device)."""
    _xla()
    import torch_xla.runtime as xr

    return int(xr.world_size())


def all_reduce_mean(tensors: list[torch.Tensor], world_size: int) -> None:
    """Average `tensors` (XLA) in place across the runtime's processes, on the device: an all-reduce in
    the traced graph (torch_xla's `all_reduce`, what its `reduce_gradients` does), no host read."""
    xm = _xla()
    xm.all_reduce(xm.REDUCE_SUM, tensors, scale=1.0 / world_size)


def compilations() -> int:
    """Graphs compiled by XLA in this process so far (0 before the first)."""
    _xla()
    import torch_xla.debug.metrics as met

    data = met.metric_data("CompileTime")
    return int(data[0]) if data else 0

"""Optional TPU backend (torch_xla, PJRT runtime) behind the trainer's interface: `--device tpu`.

UNTESTED here: no TPU and no torch_xla on this project's machines. Imported only when `--device tpu`
is asked for; everything else in the project runs without torch_xla installed.

What changes on a TPU (the trainer calls these three functions and nothing else):
- `xla_device()`: the XLA device of this process (PJRT_DEVICE=TPU selects the runtime).
- `device_loader(loader, device)`: torch_xla's MpDeviceLoader, which moves batches to the device in a
  background thread and marks step boundaries; the loader yields (batch, position) pairs as on CPU/GPU.
- `mark_step()`: cuts the lazily traced graph after each optimizer step (the loader marks steps too;
  an extra mark_step is harmless).

Launch one process per TPU core/chip with torch_xla's launcher, or torchrun with the `xla` process group
backend (`torch.distributed.init_process_group("xla", init_method="xla://")`); the trainer's DDP path
then works as on GPUs. bf16: set XLA_USE_BF16=1 or use --precision bf16 (autocast on "xla" needs
torch_xla >= 2.1). Shapes are static (fixed L and P in the TFRecords), which XLA needs to avoid
recompiling every step; the loss normalisation reads `.item()` of host-side counts only.
"""

from __future__ import annotations

from core.errors import UserError


def _xla():
    try:
        import torch_xla.core.xla_model as xm
    except ImportError as err:
        raise UserError(
            "--device tpu needs torch_xla (pip install torch_xla[tpu] matching your torch version, on a "
            f"TPU VM): {err}"
        ) from err
    return xm


def xla_device():
    return _xla().xla_device()


def device_loader(loader, device):
    """Batches on the XLA device; (batch, position) pairs as the CPU/GPU loader yields them."""
    _xla()
    import torch_xla.distributed.parallel_loader as pl

    return iter(pl.MpDeviceLoader(loader, device))


def mark_step() -> None:
    _xla().mark_step()

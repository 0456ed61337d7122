"""LAMB (as the ALBERT reference trainer has it), AdamW, and the warmup + linear-decay schedule.

LAMB, per parameter w with gradient g (google-research/albert lamb_optimizer.py; docs/albert.md §4):

    m = b1 m + (1 - b1) g                 v = b2 v + (1 - b2) g^2          (NO bias correction)
    u = m / (sqrt(v) + eps)  [+ wd * w   for decayed parameters]
    r = ||w|| / ||u||        for adapted parameters; 1 when either norm is 0, never clipped
    w = w - lr * r * u

Parameters whose name contains "LayerNorm", "layer_norm" or "bias" get neither weight decay nor layer
adaptation (r = 1): `param_groups` builds the two groups from names, so the optimizer itself never
looks at names.

Schedule (the reference's `optimization.create_optimizer`): the polynomial (power 1) decay to 0 is
counted from step 0, and during warmup it is replaced by lr * step / warmup:

    lr(s) = peak * s / warmup        if s < warmup
          = peak * (1 - s / total)   otherwise         (so lr drops from peak * (1 - w/T) at s = w)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch
import torch.nn as nn

NO_DECAY_MARKERS = ("LayerNorm", "layer_norm", "bias")


def excluded(name: str) -> bool:
    """True for parameters without weight decay and layer adaptation (docs/albert.md §4)."""
    return any(m in name for m in NO_DECAY_MARKERS)


def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """[decayed + adapted, excluded] parameter groups by name (each tied Parameter once)."""
    decay, rest = [], []
    for name, p in model.named_parameters():
        if p.requires_grad:
            (rest if excluded(name) else decay).append(p)
    groups = [
        {"params": decay, "weight_decay": weight_decay, "adapt": True},
        {"params": rest, "weight_decay": 0.0, "adapt": False},
    ]
    return [g for g in groups if g["params"]]


class Lamb(torch.optim.Optimizer):
    """LAMB exactly as the ALBERT reference (module docstring). Group options: lr, betas, eps,
    weight_decay, adapt (layer adaptation on/off)."""

    def __init__(
        self,
        params: Iterable,
        lr: float = 1.76e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-6,
        weight_decay: float = 0.01,
        adapt: bool = True,
    ):
        if lr < 0 or eps < 0 or weight_decay < 0 or not (0 <= betas[0] < 1 and 0 <= betas[1] < 1):
            raise ValueError(f"bad LAMB hyper-parameters lr={lr} betas={betas} eps={eps} wd={weight_decay}")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, adapt=adapt))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            b1, b2 = group["betas"]
            lr, eps, wd, adapt = group["lr"], group["eps"], group["weight_decay"], group["adapt"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad.float()
                state = self.state[p]
                if not state:
                    state["exp_avg"] = torch.zeros_like(p, dtype=torch.float32)
                    state["exp_avg_sq"] = torch.zeros_like(p, dtype=torch.float32)
                m, v = state["exp_avg"], state["exp_avg_sq"]
                m.mul_(b1).add_(g, alpha=1 - b1)
                v.mul_(b2).addcmul_(g, g, value=1 - b2)
                w = p.float()
                update = m / (v.sqrt() + eps)
                if wd != 0:
                    update.add_(w, alpha=wd)
                ratio = 1.0
                if adapt:
                    w_norm, u_norm = torch.linalg.vector_norm(w), torch.linalg.vector_norm(update)
                    # 1 when either norm is 0 (a zero-initialised bias, an all-zero update)
                    ratio = torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, torch.ones_like(w_norm))
                p.sub_((update * (lr * ratio)).to(p.dtype))
        return loss


def build_optimizer(
    model: nn.Module,
    name: str = "lamb",
    lr: float = 1.76e-3,
    weight_decay: float = 0.01,
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-6,
) -> torch.optim.Optimizer:
    """LAMB (reference) or AdamW (torch's, bias-corrected, decoupled decay) over `param_groups`.

    Both exclude LayerNorm/bias parameters from weight decay; AdamW has no layer adaptation."""
    groups = param_groups(model, weight_decay)
    if name == "lamb":
        return Lamb(groups, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
    if name == "adamw":
        for g in groups:
            g.pop("adapt")
        return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
    raise ValueError(f"unknown optimizer {name!r}; expected lamb or adamw")


@dataclass(frozen=True)
class Schedule:
    """Linear warmup, then linear (polynomial power 1) decay to 0 at `total` counted from step 0."""

    peak: float
    warmup: int
    total: int
    power: float = 1.0

    def __post_init__(self):
        if self.total < 1 or self.warmup < 0 or self.peak < 0:
            raise ValueError(f"bad schedule: peak {self.peak}, warmup {self.warmup}, total {self.total}")

    def __call__(self, step: int) -> float:
        if step < self.warmup:
            return self.peak * step / self.warmup
        return self.peak * max(0.0, 1.0 - step / self.total) ** self.power

    def apply(self, optimizer: torch.optim.Optimizer, step: int) -> float:
        """Set every group's rate to the schedule's, times the group's "lr_scale" (1 when absent)."""
        lr = self(step)
        for g in optimizer.param_groups:
            g["lr"] = lr * g.get("lr_scale", 1.0)
        return lr

    def state_dict(self) -> dict:
        return {"peak": self.peak, "warmup": self.warmup, "total": self.total, "power": self.power}

    def load_state_dict(self, state: dict) -> None:
        """The schedule is a function of the step (restored with the run's progress), so a checkpoint's
        must be this one: the same --lr, --warmup-steps and --steps, as its settings were checked."""
        if state != self.state_dict():
            raise ValueError(f"the checkpoint's schedule {state} is not this run's {self.state_dict()}")

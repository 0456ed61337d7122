"""LAMB against a hand-written NumPy version of the reference rule; AdamW's exclusions; the schedule."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as nn

from model.optim import Lamb, Schedule, build_optimizer, excluded, param_groups


class Toy(nn.Module):
    """Names as in ALBERT: a decayed weight, a bias, a LayerNorm, and a zero-initialised weight (its
    trust ratio must be 1 on the first step: ||w|| = 0)."""

    def __init__(self):
        super().__init__()
        self.dense = nn.Linear(4, 3)
        self.LayerNorm = nn.LayerNorm(3)
        self.zero = nn.Linear(3, 2, bias=False)
        nn.init.zeros_(self.zero.weight)
        with torch.no_grad():
            self.LayerNorm.weight.uniform_(0.5, 1.5)
            self.LayerNorm.bias.uniform_(-0.1, 0.1)

    def forward(self, x):
        return self.zero(torch.tanh(self.LayerNorm(self.dense(x)))).sum() + (self.dense(x) ** 2).mean()


def numpy_lamb(params, grads, state, lr, wd=0.01, b1=0.9, b2=0.999, eps=1e-6):
    """google-research/albert lamb_optimizer.py, one step, in float64 NumPy."""
    out = {}
    for name, w in params.items():
        g = grads[name]
        m = b1 * state[name][0] + (1 - b1) * g
        v = b2 * state[name][1] + (1 - b2) * g * g
        state[name] = (m, v)
        update = m / (np.sqrt(v) + eps)  # no bias correction
        use = not any(x in name for x in ("LayerNorm", "layer_norm", "bias"))
        if use:
            update = update + wd * w
        ratio = 1.0
        if use:
            w_norm, u_norm = np.linalg.norm(w), np.linalg.norm(update)
            ratio = w_norm / u_norm if (w_norm > 0 and u_norm > 0) else 1.0
        out[name] = w - lr * ratio * update
    return out


def test_lamb_matches_the_reference_rule_for_several_steps():
    torch.manual_seed(0)
    model = Toy()
    opt = build_optimizer(model, "lamb", lr=0.05, weight_decay=0.01)
    assert isinstance(opt, Lamb)
    params = {n: p.detach().double().numpy().copy() for n, p in model.named_parameters()}
    state = {n: (np.zeros_like(w), np.zeros_like(w)) for n, w in params.items()}
    x = torch.randn(5, 4)
    for step in range(6):
        model.zero_grad()
        model(x * (1 + step)).backward()
        grads = {n: p.grad.double().numpy().copy() for n, p in model.named_parameters()}
        params = numpy_lamb(params, grads, state, lr=0.05)
        opt.step()
        for n, p in model.named_parameters():
            np.testing.assert_allclose(
                p.detach().double().numpy(), params[n], rtol=2e-5, atol=1e-6, err_msg=n
            )
    assert (
        np.abs(params["zero.weight"]).sum() > 0
    )  # the zero-initialised weight moved (ratio 1, then ||w||/||u||)


def test_lamb_trust_ratio_is_not_clipped():
    w = nn.Parameter(torch.full((4,), 100.0))
    opt = Lamb([{"params": [w], "weight_decay": 0.0, "adapt": True}], lr=0.1)
    w.grad = torch.full((4,), 1e-3)
    opt.step()
    # u = m / (sqrt(v) + eps) ~ 1 per element -> ||u|| ~ 2, ||w|| = 200: ratio ~ 100, step ~ 0.1 * 100 * 1
    assert torch.allclose(w.detach(), torch.full((4,), 100.0 - 10.0), rtol=1e-3)


def test_excluded_names_and_groups():
    assert excluded("albert.embeddings.LayerNorm.weight") and excluded("encoder.layer_norm.weight")
    assert excluded("predictions.bias") and excluded("albert.pooler.bias")
    assert not excluded("albert.embeddings.word_embeddings.weight")
    model = Toy()
    decay, rest = param_groups(model, 0.01)
    names = {id(p): n for n, p in model.named_parameters()}
    assert {names[id(p)] for p in decay["params"]} == {"dense.weight", "zero.weight"}
    assert {names[id(p)] for p in rest["params"]} == {"dense.bias", "LayerNorm.weight", "LayerNorm.bias"}
    assert (decay["weight_decay"], decay["adapt"], rest["weight_decay"], rest["adapt"]) == (
        0.01,
        True,
        0.0,
        False,
    )


def test_tied_parameters_are_optimised_once():
    from model.albert import AlbertForPreTraining
    from tests.model.tiny import tiny_config

    model = AlbertForPreTraining(tiny_config())
    groups = param_groups(model, 0.01)
    ids = [id(p) for g in groups for p in g["params"]]
    assert len(ids) == len(set(ids)) == len(list(model.parameters()))


def test_adamw_decays_only_the_decayed_group():
    model = Toy()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt = build_optimizer(model, "adamw", lr=0.1, weight_decay=0.5)
    assert isinstance(opt, torch.optim.AdamW)
    for p in model.parameters():
        p.grad = torch.zeros_like(p)  # no gradient: only decoupled weight decay can move a weight
    opt.step()
    for n, p in model.named_parameters():
        if n in ("dense.weight",):
            assert torch.allclose(p, before[n] * (1 - 0.1 * 0.5))
        else:
            assert torch.equal(p, before[n]), n


def test_schedule_warmup_then_linear_decay_counted_from_zero():
    s = Schedule(peak=1.0, warmup=10, total=100)
    assert s(0) == 0.0 and s(5) == pytest.approx(0.5) and s(9) == pytest.approx(0.9)
    assert s(10) == pytest.approx(0.9)  # decay counted from step 0: 1 - 10/100, not the peak
    assert s(50) == pytest.approx(0.5) and s(100) == 0.0 and s(150) == 0.0
    opt = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=123.0)
    assert s.apply(opt, 60) == pytest.approx(0.4) and opt.param_groups[0]["lr"] == pytest.approx(0.4)
    with pytest.raises(ValueError):
        Schedule(1.0, 0, 0)

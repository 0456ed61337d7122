"""model/memory.py: parameter count, the per-layer formula by hand, the activation estimate against the
tensors autograd really saves (CPU, fp32), and `--micro-batch-size auto`."""

from __future__ import annotations

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from core.errors import UserError
from model.albert import AlbertForPreTraining
from model.config import AlbertConfig
from model.memory import (
    GiB,
    auto_micro_batch,
    count_parameters,
    describe,
    device_memory,
    estimate_memory,
    layer_activation_bytes,
)


@pytest.mark.parametrize("preset", ["tiny", "base"])
def test_parameter_count_matches_the_real_model(preset):
    config = AlbertConfig.from_preset(preset)
    real = sum(p.numel() for p in AlbertForPreTraining(config).parameters())
    assert count_parameters(config) == real
    est = estimate_memory(config, 128, 20, 1, precision="fp32")
    assert (est.params, est.grads, est.optimizer) == (4 * real, 4 * real, 8 * real)


def test_fsdp_shards_the_persistent_state():
    config = AlbertConfig.from_preset("base")
    ddp = estimate_memory(config, 512, 77, 1, world_size=8, parallel="ddp")
    fsdp = estimate_memory(config, 512, 77, 1, world_size=8, parallel="fsdp")
    assert (fsdp.params, fsdp.grads, fsdp.optimizer) == (ddp.params // 8, ddp.grads // 8, ddp.optimizer // 8)
    assert fsdp.activations_per_sequence == ddp.activations_per_sequence


# ---------------------------------------------------------------------------------------------------
# The per-layer formula, by hand from the docstring of layer_activation_bytes


SMALL = dict(hidden_size=64, num_attention_heads=4, intermediate_size=256, embedding_size=16, vocab_size=100)


def by_hand(H, I_, nh, s, q, a, t, c, flash, attn_dropout=False, hidden_dropout=False):
    """A_layer(q, s) exactly as the docstring writes it."""
    total = a * H * (q + c * s) + t * H * (q + 2 * s) + a * q * H + 4 * q * H * 2 + a * q * H
    total += a * q * I_ * 2 + 16 * q
    total += (4 * nh * q + a * s) if flash else 4 * nh * q * s + (5 * nh * q * s if attn_dropout else 0)
    return total + (2 * q * H if hidden_dropout else 0)


def test_layer_formula_by_hand():
    config = AlbertConfig(**SMALL)
    H, I_, nh, s = 64, 256, 4, 32
    # bf16 autocast, a later layer: three bf16 casts of the input (c = 2), t = a = 2.
    assert layer_activation_bytes(config, s) == by_hand(H, I_, nh, s, s, 2, 2, 2, True)
    # I = 4H, flash, bf16: 40 s H + 4 nh s + 18 s (the docstring's closed form).
    assert layer_activation_bytes(config, s) == 40 * s * H + 4 * nh * s + 18 * s
    # The first layer under autocast: its input is already bf16, saved once (c = 0).
    assert layer_activation_bytes(config, s, first=True) == by_hand(H, I_, nh, s, s, 2, 2, 0, True)
    # fp32: one shared input (c = 0), everything 4 bytes: 32 s H + 8 s I + ... = 64 s H + ...
    assert layer_activation_bytes(config, s, precision="fp32") == 64 * s * H + 4 * nh * s + 20 * s
    # math: Q, K, V and the probabilities in fp32 even under autocast (t = 4).
    assert layer_activation_bytes(config, s, attention="math") == by_hand(H, I_, nh, s, s, 2, 4, 2, False)
    assert layer_activation_bytes(config, s, precision="fp32", attention="math") == by_hand(
        H, I_, nh, s, s, 4, 4, 0, False
    )
    # The last layer of pretraining: q = 1 + P query rows over s key rows.
    assert layer_activation_bytes(config, s, 9) == by_hand(H, I_, nh, s, 9, 2, 2, 2, True)
    assert layer_activation_bytes(config, s, 9, precision="fp32") == by_hand(H, I_, nh, s, 9, 4, 4, 1, True)
    # Dropout: masks of the two output dropouts; math keeps the probability mask and dropped copy too.
    drop = config.replace(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    assert layer_activation_bytes(drop, s, attention="math") == by_hand(
        H, I_, nh, s, s, 2, 4, 2, False, attn_dropout=True, hidden_dropout=True
    )


def test_layer_formula_is_of_the_order_of_megatron():
    """Korthikanti et al. 2022: s h (34 + 5 a s / h) bytes per layer (fp16, with dropout, no recompute).
    Flash attention drops the 5 a s / h term; the rest differs by the documented +8 s h - 2 s h."""
    config = AlbertConfig.from_preset("base")
    s, h, nh = 512, config.hidden_size, config.num_attention_heads
    flash = layer_activation_bytes(config, s)
    assert flash == s * h * (34 + 8 - 2) + 4 * nh * s + 18 * s
    megatron = s * h * (34 + 5 * nh * s / h)
    math = layer_activation_bytes(config.replace(attention_probs_dropout_prob=0.1), s, attention="math")
    assert 0.8 < math / megatron < 1.6  # fp32 probabilities in the math path: more, same order


# ---------------------------------------------------------------------------------------------------
# Measured: the tensors autograd saves for backward in a real forward (CPU, fp32)


def pretraining_batch(B: int, s: int, P: int, vocab: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, vocab, (B, s), generator=g)
    positions = torch.stack([torch.sort(torch.randperm(s - 2, generator=g)[:P] + 1).values for _ in range(B)])
    return dict(
        input_ids=ids,
        attention_mask=torch.ones(B, s, dtype=torch.long),
        token_type_ids=torch.zeros(B, s, dtype=torch.long),
        masked_lm_positions=positions,
        masked_lm_ids=torch.gather(ids, 1, positions),
        masked_lm_weights=torch.ones(B, P),
        sentence_order_label=torch.randint(0, 2, (B,), generator=g),
    )


def saved_activation_bytes(model: torch.nn.Module, batch: dict[str, torch.Tensor], backend) -> int:
    """Bytes of the tensors saved for backward during one forward (each storage once, parameters not
    counted), plus the MLM logits the output keeps alive."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in params:
            storages[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), sdpa_kernel([backend]):
        out = model(**batch)
    logits = out.mlm_logits.untyped_storage()
    storages.setdefault(logits.data_ptr(), logits.nbytes())
    return sum(storages.values())


# CPU's SDPA with a boolean mask runs its fused flash kernel (saves output and log-sum-exp only);
# sdpa_kernel forces the math path, which saves the probabilities. Both are checked.
@pytest.mark.parametrize(
    "attention,backend", [("math", SDPBackend.MATH), ("flash", SDPBackend.FLASH_ATTENTION)]
)
def test_estimate_matches_measured_activations(attention, backend):
    config = AlbertConfig.from_preset("tiny")  # H 312, 4 layers, 12 heads, vocabulary 21128
    s, P = 128, 20
    torch.manual_seed(0)
    model = AlbertForPreTraining(config).train()
    measured = {
        m: saved_activation_bytes(model, pretraining_batch(m, s, P, config.vocab_size), backend)
        for m in (2, 4)
    }
    for m, got in measured.items():
        est = estimate_memory(config, s, P, m, precision="fp32", attention=attention)
        print(
            f"{attention} micro-batch {m}: measured {got} B, estimated {est.activations} B ({est.activations / got - 1:+.2%})"
        )
        assert 0.75 * got <= est.activations <= 1.25 * got
    # Linear in the micro-batch: what two more sequences add is what the first two cost.
    assert measured[4] - measured[2] == pytest.approx(measured[2], rel=0.02)


def test_bf16_estimate_bounds_cpu_autocast():
    """The bf16 estimate follows CUDA's autocast policy (LayerNorm in fp32, so each projection casts
    its input). CPU autocast runs LayerNorm in bf16 and saves less: the estimate must be an upper bound
    that is not far off. Per-sequence slopes, so the batch-independent bf16 weight copies drop out."""
    config = AlbertConfig.from_preset("tiny")
    s, P = 128, 20
    model = AlbertForPreTraining(config).train()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = {
            m: saved_activation_bytes(
                model, pretraining_batch(m, s, P, config.vocab_size), SDPBackend.FLASH_ATTENTION
            )
            for m in (2, 4)
        }
    per_sequence = (got[4] - got[2]) / 2
    est = estimate_memory(config, s, P, 1, precision="bf16", attention="flash").activations_per_sequence
    print(f"bf16 per sequence: CPU autocast {per_sequence:.0f} B, estimate (CUDA policy) {est} B")
    assert 0.75 * est <= per_sequence <= est


# ---------------------------------------------------------------------------------------------------
# --micro-batch-size auto


BASE = AlbertConfig.from_preset("base")


def test_no_device_memory_keeps_batch_over_world():
    assert auto_micro_batch(BASE, 512, 77, 4096, 8, None) == 512
    assert auto_micro_batch(BASE, 512, 77, 64, 1, None) == 64


def test_batch_must_divide_over_ranks():
    with pytest.raises(UserError, match="multiple of the 3 ranks") as err:
        auto_micro_batch(BASE, 512, 77, 64, 3, None)
    assert "\n" not in str(err.value)


def budget(device: int, fixed: int) -> float:
    return device * 0.85 - 2 * GiB - fixed


def test_base_on_an_80_gib_device_accumulates():
    device = 80 * GiB
    m = auto_micro_batch(BASE, 512, 77, 4096, 8, device)
    per_rank = 512
    assert per_rank % m == 0 and m < per_rank
    est = estimate_memory(BASE, 512, 77, m, world_size=8)
    assert est.total <= device * 0.85 - 2 * GiB
    larger = min(d for d in range(m + 1, per_rank + 1) if per_rank % d == 0)
    assert estimate_memory(BASE, 512, 77, larger, world_size=8).total > device * 0.85 - 2 * GiB
    line = describe(est, per_rank, device)
    assert line.startswith(f"micro-batch {m} of 512 per rank ({512 // m} accumulation steps)")
    assert "of 80.00 GiB" in line and "\n" not in line


def test_a_device_too_small_is_a_one_line_user_error():
    with pytest.raises(UserError, match="one sequence of 512 tokens needs") as err:
        auto_micro_batch(BASE, 512, 77, 4096, 8, 2 * GiB)
    assert "\n" not in str(err.value) and "--parallel fsdp" in str(err.value)


def test_a_bigger_model_gets_a_smaller_micro_batch():
    device = 80 * GiB
    base = auto_micro_batch(BASE, 512, 77, 4096, 8, device)
    xxlarge = auto_micro_batch(AlbertConfig.from_preset("xxlarge"), 512, 77, 4096, 8, device)
    assert xxlarge < base


@pytest.mark.parametrize("batch,world", [(4096, 8), (96, 1), (384, 4), (100, 2), (7, 7)])
@pytest.mark.parametrize("gib", [3, 6, 16, 40, 80, 141])
def test_micro_batch_always_divides_the_per_rank_batch(batch, world, gib):
    per_rank = batch // world
    try:
        m = auto_micro_batch(BASE, 512, 77, batch, world, gib * GiB)
    except UserError:
        assert gib <= 3  # only a device too small for one sequence
        return
    assert 1 <= m <= per_rank and per_rank % m == 0


def test_device_memory_on_cpu_is_unknown():
    assert device_memory("cpu") is None
    assert device_memory(torch.device("cpu")) is None
    if not torch.cuda.is_available():
        assert device_memory("cuda") is None

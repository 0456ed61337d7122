"""GPU memory of one training step on one rank, and `--micro-batch-size auto` that follows from it.

A global batch of 4096 sequences of 512 tokens on 8 GPUs is 512 sequences per rank: far too many for one
forward pass. `auto_micro_batch` picks the largest micro-batch that fits the device and leaves the rest
to gradient accumulation (the trainer's step is exact whatever the split). docs/memory.md explains the
model in prose; this file gives the formulas.

Memory of a step = a part that does not depend on the batch + micro-batch x (cost of one sequence):

    fixed        = 4N params + 4N grads + 8N optimizer       N = distinct parameters, all fp32
                   (/ world under --parallel fsdp)
                 + 2N     bf16 autocast: the cached bf16 copy of every weight (saved for backward)
                 + 4N     DDP, world > 1: the flat gradient buckets the all-reduce works on
                 + 8N     FSDP, world > 1: the gathered (unsharded) params and grads; model/distributed.py
                          shards only the root module, so the whole model is one unit, gathered for
                          forward and backward
    per sequence = activations (tensors autograd saves for backward, plus the MLM logits the output
                   holds) + workspace (the fp32 gradients of the MLM log-probabilities and logits, both
                   alive at the start of backward while every activation still is)

LAMB and AdamW both keep two fp32 moments per parameter (8N). Autocast keeps fp32 master weights and
fp32 gradients; only the matmuls run in bf16.

Activations, per sequence: s tokens, P = max_predictions, H hidden, E embedding, I intermediate, V vocab,
nh heads, n = num_hidden_layers x inner_group_num layer APPLICATIONS (ALBERT shares one layer's
parameters across depth, but runs it n times and each run saves its own activations). The byte sizes:

    a = 2 (bf16 autocast) or 4 (fp32): outputs of matmuls, GELU, and the bf16 casts of matmul inputs
    4  always: LayerNorm inputs and statistics (CUDA autocast runs layer_norm in fp32, so a residual sum
       of fp32 and bf16 is fp32), the attention log-sum-exp, the MLM log-probabilities
    t = 4 for the attention internals of the math path (it upcasts bf16 to fp32, since torch 2.5), a for
        the fused kernels

    A_seq = A_emb + sum over the n layer applications of A_layer(q, s) + A_mlm + A_sop
      A_emb   = s E (4 + a) + 8 s                     LayerNorm input and mean/rstd, E->H projection input
      A_mlm   = P (a H + E (2a + 4) + 8 + V (4 + a))  on the P gathered rows: dense input, GELU input,
                                                      LayerNorm input (fp32) and mean/rstd, decoder input,
                                                      log-probabilities (fp32), logits (kept by the output)
      A_sop   = H (3a + 1)                            pooler input, tanh output, dropout mask and output
      workspace = 8 P V                               (not an activation: the peak at the start of backward)

AlbertForPreTraining runs its last layer only at [CLS] and the masked positions: that application has
q = 1 + P query rows over s key rows; every other has q = s. `layer_activation_bytes` gives A_layer(q, s).

Assumptions, all documented where they are used: CUDA's bf16 autocast policy (on CPU, autocast runs
LayerNorm in bf16 and saves less); GELU (a ReLU would save one tensor less per layer); dropout masks of
1 byte (CUDA's fused dropout; the CPU kernel keeps a float mask); the allocator's fragmentation, the CUDA
context and cuBLAS workspaces are not modelled: `headroom` and `reserve_bytes` cover them. Measured on
CPU in fp32 (tests/model/test_memory.py), the estimate matches the tensors autograd saves to within ~1%.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from core.errors import UserError
from model.config import AlbertConfig

GiB = 1024**3
FP32 = 4  # bytes

PRECISIONS = ("bf16", "fp32")
ATTENTIONS = ("flash", "math")
OPTIMIZERS = ("lamb", "adamw")
PARALLEL_MODES = ("ddp", "fsdp")


def _check(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise UserError(f"unknown {name} {value!r}; expected one of {', '.join(allowed)}")


def count_parameters(config: AlbertConfig) -> int:
    """Distinct parameters of AlbertForPreTraining (shared layers and the tied decoder counted once).

    Built on the meta device: shapes only, no memory, a few milliseconds even for xxlarge."""
    from model.albert import AlbertForPreTraining  # here, so importing this module stays light

    with torch.device("meta"):
        model = AlbertForPreTraining(config)
    return sum(p.numel() for p in model.parameters())


def layer_activation_bytes(
    config: AlbertConfig,
    seq_len: int,
    query_len: int | None = None,
    precision: str = "bf16",
    attention: str = "flash",
    first: bool = False,
) -> int:
    """A_layer(q, s): bytes one application of a transformer layer saves for backward, per sequence.

    s = seq_len key rows, q = query_len query rows (default s; the last layer of pretraining has 1 + P):

        A_layer = a H (q + c s)         inputs of the Q, K, V projections (see c below)
                + t H (q + 2 s)         Q, K, V as saved by the attention
                + a q H                 attention output (input of `dense`)
                + 4 q H * 2             the two LayerNorm inputs (fp32)
                + a q H                 FFN input
                + a q I * 2             GELU input and output (input of `ffn_output`)
                + 16 q                  mean and rstd of the two LayerNorms (fp32)
                + attention-specific:
                    flash: 4 nh q + a s     log-sum-exp (fp32) and the padding mask as an additive mask
                    math:  4 nh q s         softmax probabilities, fp32 (the s x s scores are not kept:
                                            softmax's backward needs only its output)
                           + 5 nh q s       if attention dropout > 0: 1-byte mask + dropped probabilities
                + 2 q H                 if hidden dropout > 0: the masks of the two output dropouts

    c counts the extra copies of the layer input that the K and V projections keep: 2 under bf16
    autocast (the input is a fp32 LayerNorm output; each of the three projections casts it itself and
    autocast caches casts of weights only); 0 when Q, K and V share one tensor (fp32, or the first layer
    under autocast, whose input is already the bf16 output of the E->H projection) and q = s; 1 when
    they share one but Q reads gathered rows (q < s). t = 4 on the math path (it computes in fp32), else
    t = a. With a = 2, q = s, I = 4H, no dropout, flash: A_layer = 40 s H + 4 nh s + 18 s, to compare
    with Megatron's s H (34 + 5 nh s / H) for fp16 (Korthikanti et al. 2022), which keeps LayerNorm
    inputs in fp16 (-4 s H), one copy of the layer input (-4 s H) and two dropout masks (+2 s H), and
    whose 5 nh s / H term is the s x s attention matrices flash attention never stores.
    """
    _check("precision", precision, PRECISIONS)
    _check("attention", attention, ATTENTIONS)
    H, I_, nh = config.hidden_size, config.intermediate_size, config.num_attention_heads
    s = seq_len
    q = seq_len if query_len is None else query_len
    a = 2 if precision == "bf16" else FP32
    t = FP32 if attention == "math" else a
    if precision == "bf16" and not first:
        c = 2
    else:
        c = 0 if q == s else 1
    total = (
        a * H * (q + c * s)
        + t * H * (q + 2 * s)
        + a * q * H
        + 2 * FP32 * q * H
        + a * q * H
        + 2 * a * q * I_
        + 4 * FP32 * q
    )
    if attention == "flash":
        total += FP32 * nh * q + a * s
    else:
        total += FP32 * nh * q * s
        if config.attention_probs_dropout_prob > 0:
            total += (1 + FP32) * nh * q * s
    if config.hidden_dropout_prob > 0:
        total += 2 * q * H
    return total


@dataclass(frozen=True)
class MemoryEstimate:
    """Estimated bytes on one rank for one forward + backward of `micro_batch` sequences (see the module
    docstring for each term)."""

    num_parameters: int
    micro_batch: int
    params: int
    """fp32 master weights (sharded under fsdp)."""
    grads: int
    """fp32 gradients (sharded under fsdp)."""
    optimizer: int
    """Two fp32 moments per parameter, LAMB and AdamW alike (sharded under fsdp)."""
    buffers: int
    """Batch-independent copies: autocast's bf16 weights, DDP buckets, FSDP's gathered params/grads."""
    embeddings_per_sequence: int
    layers_per_sequence: int
    """All n layer applications."""
    heads_per_sequence: int
    """MLM head on the P gathered rows, pooler and SOP head."""
    workspace_per_sequence: int
    """fp32 gradients of the MLM log-probabilities and logits at the start of backward."""

    @property
    def fixed(self) -> int:
        return self.params + self.grads + self.optimizer + self.buffers

    @property
    def activations_per_sequence(self) -> int:
        return self.embeddings_per_sequence + self.layers_per_sequence + self.heads_per_sequence

    @property
    def per_sequence(self) -> int:
        """What one more sequence in the micro-batch costs: its activations and its workspace."""
        return self.activations_per_sequence + self.workspace_per_sequence

    @property
    def activations(self) -> int:
        return self.micro_batch * self.activations_per_sequence

    @property
    def total(self) -> int:
        return self.fixed + self.micro_batch * self.per_sequence

    def __str__(self) -> str:
        return (
            f"params+grads+optimizer {_gib(self.params + self.grads + self.optimizer)} GiB, "
            f"buffers {_gib(self.buffers)} GiB, activations {_gib(self.activations_per_sequence)} GiB "
            f"(+{_gib(self.workspace_per_sequence)} workspace) per sequence x {self.micro_batch}, "
            f"total {_gib(self.total)} GiB"
        )


def _gib(n: float) -> str:
    return f"{n / GiB:.2f}"


def estimate_memory(
    config: AlbertConfig,
    seq_len: int,
    max_predictions: int,
    micro_batch: int,
    optimizer: str = "lamb",
    precision: str = "bf16",
    world_size: int = 1,
    parallel: str = "ddp",
    attention: str = "flash",
) -> MemoryEstimate:
    """Memory of one training step of AlbertForPreTraining on one rank (module docstring: the formula).

    precision is the resolved one ("bf16" autocast or "fp32"); attention is "flash" for the fused SDPA
    kernels (CUDA's flash and memory-efficient kernels, CPU's flash kernel: none stores the s x s
    matrices) or "math" for the fallback that does."""
    _check("optimizer", optimizer, OPTIMIZERS)
    _check("precision", precision, PRECISIONS)
    _check("--parallel", parallel, PARALLEL_MODES)
    _check("attention", attention, ATTENTIONS)
    c = config
    N = count_parameters(c)
    shards = world_size if parallel == "fsdp" and world_size > 1 else 1
    buffers = 2 * N if precision == "bf16" else 0  # autocast's cache of bf16 weights
    if world_size > 1:
        buffers += 4 * N if parallel == "ddp" else 8 * N

    a = 2 if precision == "bf16" else FP32
    s, P, H, E, V = seq_len, max_predictions, c.hidden_size, c.embedding_size, c.vocab_size
    emb = s * E * (FP32 + a) + 2 * FP32 * s + (s * E if c.hidden_dropout_prob > 0 else 0)
    n = c.num_hidden_layers * c.inner_group_num
    layers = sum(
        layer_activation_bytes(
            c, s, 1 + P if i == n - 1 else None, precision=precision, attention=attention, first=i == 0
        )
        for i in range(n)
    )
    mlm = P * (a * H + E * (2 * a + FP32) + 2 * FP32 + V * (FP32 + a))
    sop = H * (3 * a + (1 if c.classifier_dropout_prob > 0 else 0))
    return MemoryEstimate(
        num_parameters=N,
        micro_batch=micro_batch,
        params=FP32 * N // shards,
        grads=FP32 * N // shards,
        optimizer=2 * FP32 * N // shards,
        buffers=buffers,
        embeddings_per_sequence=emb,
        layers_per_sequence=layers,
        heads_per_sequence=mlm + sop,
        workspace_per_sequence=2 * FP32 * P * V,
    )


def auto_micro_batch(
    config: AlbertConfig,
    seq_len: int,
    max_predictions: int,
    batch_size: int,
    world_size: int,
    device_memory_bytes: int | None,
    optimizer: str = "lamb",
    precision: str = "bf16",
    parallel: str = "ddp",
    attention: str = "flash",
    headroom: float = 0.85,
    reserve_bytes: int = 2 * GiB,
) -> int:
    """`--micro-batch-size auto`: sequences per rank per forward pass.

    Unknown device memory (CPU): batch_size / world_size, no accumulation (the default without auto).
    Otherwise the largest m that divides per_rank = batch_size / world_size (so accumulation steps
    per_rank / m are whole) with

        m x per_sequence <= device_memory x headroom - reserve_bytes - fixed

    headroom keeps a share of the device for what the model leaves out (allocator fragmentation, the
    transient tensors of one op); reserve_bytes for the CUDA context, cuBLAS/NCCL workspaces and the
    data loader's pinned batches."""
    if batch_size < 1 or world_size < 1 or batch_size % world_size:
        raise UserError(f"--batch-size {batch_size} must be a positive multiple of the {world_size} ranks")
    per_rank = batch_size // world_size
    if device_memory_bytes is None:
        return per_rank
    est = estimate_memory(
        config, seq_len, max_predictions, 1, optimizer, precision, world_size, parallel, attention
    )
    budget = device_memory_bytes * headroom - reserve_bytes - est.fixed
    fits = [m for m in range(1, per_rank + 1) if per_rank % m == 0 and m * est.per_sequence <= budget]
    if not fits:
        raise UserError(
            f"one sequence of {seq_len} tokens needs {_gib(est.per_sequence)} GiB on top of "
            f"{_gib(est.fixed)} GiB of weights, gradients and optimizer state, but the device has "
            f"{_gib(device_memory_bytes)} GiB ({headroom:.0%} of it less {_gib(reserve_bytes)} GiB usable): "
            f"use a smaller model or shorter sequences, or --parallel fsdp to shard the optimizer state"
        )
    return max(fits)


def device_memory(device: torch.device | str) -> int | None:
    """Total memory of a CUDA device in bytes; None for the CPU or any other device (memory unknown)."""
    device = torch.device(device)
    if device.type != "cuda" or not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_properties(device).total_memory


def describe(estimate: MemoryEstimate, per_rank: int, device_memory_bytes: int | None = None) -> str:
    """One line for the trainer's log, e.g. "micro-batch 256 of 512 per rank (2 accumulation steps):
    params+grads+optimizer 0.18 GiB, ... total 50.27 GiB of 80.00 GiB"."""
    m = estimate.micro_batch
    of = "unknown device memory" if device_memory_bytes is None else f"{_gib(device_memory_bytes)} GiB"
    return f"micro-batch {m} of {per_rank} per rank ({per_rank // m} accumulation steps): {estimate} of {of}"

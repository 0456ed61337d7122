"""ALBERT (Lan et al., 2019) in one file: factorized embeddings, cross-layer sharing, SOP. The
fine-tuning heads on this backbone are in model/classifiers.py.

Module and parameter names follow transformers' `modeling_albert.py`, so for `sharing="all"` the
state_dict of `AlbertForPreTraining` has exactly transformers' keys and checkpoints move between the
two with no renaming (model/convert.py).

Shapes: B batch, L sequence length, E embedding width, H hidden width, nh heads, hs = H / nh,
I intermediate (FFN) width, V vocabulary, P predictions per sequence, Q evaluated query positions.

Speed choices (all exact, none changes results):
- the MLM head runs only on the P gathered `masked_lm_positions` (never B x L x V logits), as in the
  TF reference;
- for pretraining the LAST layer is evaluated only at [CLS] and at the masked positions: its keys and
  values still come from every position, but queries, attention output, FFN and LayerNorms run on
  1 + P rows instead of L (nothing else reads the other rows);
- attention goes through F.scaled_dot_product_attention with a boolean key-padding mask (CPU: fused
  flash kernel; CUDA: the memory-efficient kernel, or flash when no mask is passed);
- the tanh GELU is torch's fused `gelu(approximate="tanh")`, one kernel instead of eight.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch
import torch.nn as nn
import torch.nn.functional as F

from model.config import AlbertConfig

ACT2FN: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "gelu_new": partial(F.gelu, approximate="tanh"),  # TF ALBERT's "gelu"
    "gelu_pytorch_tanh": partial(F.gelu, approximate="tanh"),
    "gelu": F.gelu,  # exact (erf)
    "relu": F.relu,
    "tanh": torch.tanh,
    "silu": F.silu,
    "swish": F.silu,
}


def gather_positions(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """x (B, L, D), positions (B, Q) -> (B, Q, D): the rows of x at the given positions."""
    return torch.gather(x, 1, positions.long().unsqueeze(-1).expand(-1, -1, x.size(-1)))


# ---------------------------------------------------------------------------------------------------
# Backbone


class AlbertEmbeddings(nn.Module):
    """Word + position + token-type embeddings, all E wide, summed, LayerNorm'd (E -> H happens later)."""

    def __init__(self, config: AlbertConfig):
        super().__init__()
        E = config.embedding_size
        self.word_embeddings = nn.Embedding(config.vocab_size, E)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, E)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, E)
        self.LayerNorm = nn.LayerNorm(E, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        B, L = input_ids.shape
        if L > self.position_embeddings.num_embeddings:
            raise ValueError(
                f"sequence length {L} > max_position_embeddings {self.position_embeddings.num_embeddings}"
            )
        positions = torch.arange(L, device=input_ids.device)
        x = self.word_embeddings(input_ids) + self.position_embeddings(positions)  # (B, L, E) + (L, E)
        if token_type_ids is None:
            x = x + self.token_type_embeddings.weight[0]  # every token is type 0
        else:
            x = x + self.token_type_embeddings(token_type_ids)
        return self.dropout(self.LayerNorm(x))  # (B, L, E)


class AlbertAttention(nn.Module):
    """Post-LN multi-head self-attention: LayerNorm(x + dense(attention(x)))."""

    def __init__(self, config: AlbertConfig):
        super().__init__()
        H = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.query = nn.Linear(H, H)
        self.key = nn.Linear(H, H)
        self.value = nn.Linear(H, H)
        self.dense = nn.Linear(H, H)
        self.LayerNorm = nn.LayerNorm(H, eps=config.layer_norm_eps)
        self.attention_dropout = config.attention_probs_dropout_prob
        self.output_dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None, query_positions: torch.Tensor | None = None
    ) -> torch.Tensor:
        # x (B, L, H); mask (B, 1, 1, L) bool, True = attend; query_positions (B, Q) or None (Q = L)
        B, L, H = x.shape
        xq = x if query_positions is None else gather_positions(x, query_positions)  # (B, Q, H)
        Q = xq.size(1)
        q = self.query(xq).view(B, Q, self.num_heads, -1).transpose(1, 2)  # (B, nh, Q, hs)
        k = self.key(x).view(B, L, self.num_heads, -1).transpose(1, 2)  # (B, nh, L, hs)
        v = self.value(x).view(B, L, self.num_heads, -1).transpose(1, 2)  # (B, nh, L, hs)
        p = self.attention_dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)  # (B, nh, Q, hs)
        y = y.transpose(1, 2).reshape(B, Q, H)  # heads side by side again
        return self.LayerNorm(xq + self.output_dropout(self.dense(y)))  # (B, Q, H)


class AlbertLayer(nn.Module):
    """One transformer block: attention, then LayerNorm(a + ffn_output(act(ffn(a))))."""

    def __init__(self, config: AlbertConfig):
        super().__init__()
        # Registration order = transformers' order, so state_dict keys come out in the same order.
        self.full_layer_layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.attention = AlbertAttention(config)
        self.ffn = nn.Linear(config.hidden_size, config.intermediate_size)
        self.ffn_output = nn.Linear(config.intermediate_size, config.hidden_size)
        self.activation = ACT2FN[config.hidden_act]
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None, query_positions: torch.Tensor | None = None
    ) -> torch.Tensor:
        a = self.attention(x, mask, query_positions)  # (B, Q, H)
        h = self.ffn_output(self.activation(self.ffn(a)))  # (B, Q, I) -> (B, Q, H)
        return self.full_layer_layer_norm(a + self.dropout(h))  # (B, Q, H)


class AlbertLayerGroup(nn.Module):
    """`inner_group_num` layers with their own parameters, run one after the other."""

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.albert_layers = nn.ModuleList([AlbertLayer(config) for _ in range(config.inner_group_num)])


# Sub-modules of an AlbertLayer that each sharing mode ties across the per-layer groups.
SHARED_SUBMODULES: dict[str, tuple[str, ...]] = {
    "all": (),  # sharing comes from reusing whole groups instead
    "attention": ("attention",),
    "ffn": ("ffn", "ffn_output", "full_layer_layer_norm"),
    "none": (),
}


class AlbertTransformer(nn.Module):
    """E -> H projection, then `num_hidden_layers` applications of the layer groups."""

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.config = config
        self.embedding_hidden_mapping_in = nn.Linear(config.embedding_size, config.hidden_size)
        self.albert_layer_groups = nn.ModuleList(
            [AlbertLayerGroup(config) for _ in range(config.num_hidden_groups)]
        )
        # Partial sharing: one group per layer whose shared sub-modules ARE group 0's modules (the same
        # Parameter objects, so one gradient accumulates over all layers and the optimizer sees them once).
        first = self.albert_layer_groups[0].albert_layers[0]
        for group in self.albert_layer_groups[1:]:
            for name in SHARED_SUBMODULES[config.sharing]:
                setattr(group.albert_layers[0], name, getattr(first, name))

    def layers(self) -> list[AlbertLayer]:
        """Layers in the order they are applied: hidden layer i runs group int(i / (L / G))."""
        L, G = self.config.num_hidden_layers, self.config.num_hidden_groups
        out: list[AlbertLayer] = []
        for i in range(L):
            out.extend(self.albert_layer_groups[int(i / (L / G))].albert_layers)
        return out

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None, query_positions: torch.Tensor | None = None
    ) -> torch.Tensor:
        # x (B, L, E) -> (B, L, H); the last layer runs only at query_positions when given -> (B, Q, H)
        x = self.embedding_hidden_mapping_in(x)
        layers = self.layers()
        for i, layer in enumerate(layers):
            x = layer(x, mask, query_positions if i == len(layers) - 1 else None)
        return x


@torch.no_grad()
def init_weights(module: nn.Module, std: float) -> None:
    """Truncated normal(0, std) cut at 2 std (TF's truncated_normal), LayerNorm 1/0, biases 0."""
    if isinstance(module, nn.Linear):
        nn.init.trunc_normal_(module.weight, std=std, a=-2 * std, b=2 * std)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        nn.init.trunc_normal_(module.weight, std=std, a=-2 * std, b=2 * std)
    elif isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)
    elif isinstance(module, AlbertMLMHead):
        nn.init.zeros_(module.bias)


class AlbertPreTrainedModel(nn.Module):
    """Shared plumbing of the public models: config, init, parameter count."""

    config: AlbertConfig

    def init_weights(self) -> None:
        self.apply(partial(init_weights, std=self.config.initializer_range))

    def num_parameters(self) -> int:
        """Distinct parameters (a tied or shared tensor counts once)."""
        return sum(p.numel() for p in self.parameters())


@dataclass
class AlbertModelOutput:
    sequence_output: torch.Tensor  # (B, L, H), or (B, Q, H) when output_positions was given
    pooled_output: torch.Tensor | None  # (B, H): tanh(dense([CLS])); None without a pooler


class AlbertModel(AlbertPreTrainedModel):
    """Embeddings + encoder + pooler. Returns the sequence output and the pooled [CLS] output."""

    def __init__(self, config: AlbertConfig, add_pooling_layer: bool = True, *, _init: bool = True):
        super().__init__()
        self.config = config
        self.embeddings = AlbertEmbeddings(config)
        self.encoder = AlbertTransformer(config)
        self.pooler = nn.Linear(config.hidden_size, config.hidden_size) if add_pooling_layer else None
        if _init:
            self.init_weights()

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        output_positions: torch.Tensor | None = None,
    ) -> AlbertModelOutput:
        """input_ids (B, L); attention_mask (B, L) 1 = real token, 0 = padding; token_type_ids (B, L).

        output_positions (B, Q): return the sequence output only at these positions (the last layer
        is then evaluated only there and at [CLS], which the pooler needs).
        """
        # Key-padding mask (B, 1, 1, L), True = attend; broadcast over heads and queries.
        mask = None if attention_mask is None else attention_mask.bool()[:, None, None, :]
        x = self.embeddings(input_ids, token_type_ids)  # (B, L, E)
        if output_positions is None:
            seq = self.encoder(x, mask)  # (B, L, H)
            cls = seq[:, 0]
        else:
            cls_and_positions = F.pad(output_positions.long(), (1, 0))  # (B, 1 + Q): [CLS] first
            out = self.encoder(x, mask, cls_and_positions)  # (B, 1 + Q, H)
            cls, seq = out[:, 0], out[:, 1:]
        pooled = torch.tanh(self.pooler(cls)) if self.pooler is not None else None  # (B, H)
        return AlbertModelOutput(seq, pooled)


# ---------------------------------------------------------------------------------------------------
# Pretraining: MLM + SOP


class AlbertMLMHead(nn.Module):
    """dense H -> E, activation, LayerNorm, then decoder E -> V tied to the word embeddings, + bias."""

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.LayerNorm = nn.LayerNorm(config.embedding_size, eps=config.layer_norm_eps)
        self.dense = nn.Linear(config.hidden_size, config.embedding_size)
        # The decoder owns no storage: its weight is set to the word-embedding Parameter by the model
        # (AlbertForPreTraining.tie_weights) and its bias IS self.bias.
        self.decoder = nn.Linear(config.embedding_size, config.vocab_size, device="meta")
        self.decoder.bias = self.bias
        self.activation = ACT2FN[config.hidden_act]

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        # h (B, P, H) -> (B, P, E) -> (B, P, V)
        return self.decoder(self.LayerNorm(self.activation(self.dense(h))))


class AlbertSOPHead(nn.Module):
    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.dropout = nn.Dropout(config.classifier_dropout_prob)
        self.classifier = nn.Linear(config.hidden_size, 2)

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.dropout(pooled))  # (B, H) -> (B, 2)


@dataclass
class PreTrainingOutput:
    """Losses are scalars (None when their labels were not given); counts are detached float scalars
    so evaluation can sum them over batches: accuracy = correct / count."""

    loss: torch.Tensor | None
    mlm_loss: torch.Tensor | None
    sop_loss: torch.Tensor | None
    mlm_logits: torch.Tensor  # (B, P, V) at masked_lm_positions, or (B, L, V) without positions
    sop_logits: torch.Tensor  # (B, 2)
    mlm_correct: torch.Tensor | None = None  # sum of weights of the correctly predicted tokens
    mlm_weight: torch.Tensor | None = None  # sum of masked_lm_weights (number of real predictions)
    sop_correct: torch.Tensor | None = None
    sop_count: torch.Tensor | None = None


class AlbertForPreTraining(AlbertPreTrainedModel):
    """ALBERT with the MLM head (at masked positions only) and the sentence-order head.

    Argument names follow the TFRecord schema (core/schema.py): pass input_mask as attention_mask,
    segment_ids as token_type_ids, next_sentence_labels as sentence_order_label.
    """

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.config = config
        self.albert = AlbertModel(config, _init=False)
        self.predictions = AlbertMLMHead(config)
        self.sop_classifier = AlbertSOPHead(config)
        self.tie_weights()
        self.init_weights()

    def tie_weights(self) -> None:
        """Decoder weight = word embeddings (one Parameter). Call again after load_state_dict(assign=True)."""
        self.predictions.decoder.weight = self.albert.embeddings.word_embeddings.weight
        self.predictions.decoder.bias = self.predictions.bias

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        masked_lm_positions: torch.Tensor | None = None,
        masked_lm_ids: torch.Tensor | None = None,
        masked_lm_weights: torch.Tensor | None = None,
        sentence_order_label: torch.Tensor | None = None,
    ) -> PreTrainingOutput:
        """input_ids, attention_mask, token_type_ids (B, L); masked_lm_* (B, P); sentence_order_label
        (B,) or (B, 1). Without masked_lm_positions the MLM head runs at every position (inference on
        short inputs only: that is B x L x V logits).

        loss = sum(w * CE(mlm)) / sum(w) + CE(sop), w = masked_lm_weights (1 for a real prediction).
        """
        out = self.albert(input_ids, attention_mask, token_type_ids, output_positions=masked_lm_positions)
        mlm_logits = self.predictions(out.sequence_output)  # (B, P, V)
        sop_logits = self.sop_classifier(out.pooled_output)  # (B, 2)

        mlm_loss = sop_loss = mlm_correct = mlm_weight = sop_correct = sop_count = None
        if masked_lm_ids is not None:
            if masked_lm_positions is None:
                raise ValueError("masked_lm_ids needs masked_lm_positions")
            ids = masked_lm_ids.long()
            w = (
                torch.ones_like(ids, dtype=torch.float32)
                if masked_lm_weights is None
                else masked_lm_weights.float()
            )
            ce = F.cross_entropy(mlm_logits.flatten(0, 1).float(), ids.flatten(), reduction="none")  # (B*P,)
            mlm_weight = w.sum()
            mlm_loss = (ce * w.flatten()).sum() / mlm_weight.clamp_min(1e-5)  # 0 when nothing is predicted
            with torch.no_grad():
                mlm_correct = ((mlm_logits.argmax(-1) == ids).float() * w).sum()
                mlm_weight = mlm_weight.detach()
        if sentence_order_label is not None:
            labels = sentence_order_label.long().reshape(-1)  # (B,)
            sop_loss = F.cross_entropy(sop_logits.float(), labels)
            with torch.no_grad():
                sop_correct = (sop_logits.argmax(-1) == labels).float().sum()
                sop_count = torch.tensor(float(labels.numel()), device=labels.device)
        losses = [t for t in (mlm_loss, sop_loss) if t is not None]
        loss = sum(losses[1:], losses[0]) if losses else None
        return PreTrainingOutput(
            loss, mlm_loss, sop_loss, mlm_logits, sop_logits, mlm_correct, mlm_weight, sop_correct, sop_count
        )


# ---------------------------------------------------------------------------------------------------
# FLOPs for MFU


def model_flops_per_token(
    config: AlbertConfig, seq_len: int, predictions_per_seq: int | None = None, training: bool = True
) -> float:
    """Matmul FLOPs per input token of one pretraining step (training) or forward pass.

    The "6N" rule counted per APPLIED layer (a shared layer costs its FLOPs every time it runs), plus
    the attention term of PaLM's appendix B:

        forward = n_layers * (2 * (4 H^2 + 2 H F) + 4 L H)      # projections + FFN, QK^T and AV
                + 2 E H                                          # embedding_hidden_mapping_in
                + f * 2 (H E + E V)                              # MLM head on the f = P / L predicted tokens
                + 2 (H^2 + 2 H) / L                              # pooler + SOP, once per sequence
        training = 3 * forward                                   # backward = 2 x forward

    with F = intermediate_size, n_layers = num_hidden_layers * inner_group_num and P = round(0.15 L)
    by default. Embedding
    lookups, LayerNorms, softmax and elementwise ops are not counted (by convention). This is the
    standard dense computation: AlbertForPreTraining evaluates its last layer only at the predicted
    positions, so it does slightly less work than counted here (that shows up as a higher MFU).
    """
    c = config
    H, E, F_, V, L = c.hidden_size, c.embedding_size, c.intermediate_size, c.vocab_size, seq_len
    P = round(0.15 * L) if predictions_per_seq is None else predictions_per_seq
    n_layers = c.num_hidden_layers * c.inner_group_num
    forward = (
        n_layers * (2 * (4 * H * H + 2 * H * F_) + 4 * L * H)
        + 2 * E * H
        + (P / L) * 2 * (H * E + E * V)
        + 2 * (H * H + 2 * H) / L
    )
    return float(3 * forward if training else forward)

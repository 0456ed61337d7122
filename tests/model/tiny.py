"""The tiny configs and inputs every test shares: `tiny_config()` for unit tests of the model (hidden
16, vocabulary 64), `TINY_MODEL` for tests that train on real instances (hidden 32, length L; the
vocabulary size comes from the spm.model)."""

from __future__ import annotations

import torch

from model.config import AlbertConfig

VOCAB = 64
L = 64  # sequence length of the training tests' instances

TINY_MODEL = dict(
    embedding_size=16,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=64,
    max_position_embeddings=L,
    classifier_dropout_prob=0.0,
)


def tiny_config(**overrides) -> AlbertConfig:
    values = dict(
        vocab_size=VOCAB,
        embedding_size=8,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
    )
    values.update(overrides)
    return AlbertConfig(**values)


def toy_batch(B: int = 3, L: int = 12, P: int = 4, seed: int = 0) -> dict[str, torch.Tensor]:
    """A pretraining batch in the TFRecord schema's shapes, with padding and padded predictions."""
    g = torch.Generator().manual_seed(seed)
    lengths = [L, L - 3, L // 2][:B] + [L] * max(0, B - 3)
    input_ids = torch.randint(5, VOCAB, (B, L), generator=g)
    attention_mask = torch.zeros(B, L, dtype=torch.long)
    token_type_ids = torch.zeros(B, L, dtype=torch.long)
    positions = torch.zeros(B, P, dtype=torch.long)
    weights = torch.zeros(B, P)
    for b, n in enumerate(lengths):
        input_ids[b, n:] = 0
        attention_mask[b, :n] = 1
        token_type_ids[b, n // 2 : n] = 1
        k = min(P, max(1, n // 3))  # fewer real predictions on short rows: the rest is padding
        positions[b, :k] = torch.sort(torch.randperm(n - 2, generator=g)[:k] + 1).values
        weights[b, :k] = 1.0
    return dict(
        input_ids=input_ids,
        attention_mask=attention_mask,
        token_type_ids=token_type_ids,
        masked_lm_positions=positions,
        masked_lm_ids=torch.gather(input_ids, 1, positions),
        masked_lm_weights=weights,
        sentence_order_label=torch.randint(0, 2, (B,), generator=g),
    )


@torch.no_grad()
def randomize_(model: torch.nn.Module, seed: int = 0, std: float = 0.3) -> torch.nn.Module:
    """Weights large enough that activations are O(1) (the 0.02 init keeps them so small that, e.g.,
    exact and tanh GELU agree to 1e-6), LayerNorm gains around 1, random biases. Ties are kept."""
    g = torch.Generator().manual_seed(seed)
    for name, p in model.named_parameters():
        noise = torch.randn(p.shape, generator=g)
        p.copy_(1 + 0.1 * noise if "LayerNorm" in name or "layer_norm" in name else std * noise)
    return model

"""The PyTorch ALBERT: shapes, masking, tying, losses, sharing, parameter counts, FLOPs."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from model.albert import AlbertForPreTraining, AlbertModel, gather_positions, model_flops_per_token
from model.classifiers import AlbertForSequenceClassification, AlbertForTokenClassification
from model.config import AlbertConfig
from tests.model.tiny import VOCAB, randomize_, tiny_config


def pretraining_model(config: AlbertConfig, seed: int = 0) -> AlbertForPreTraining:
    return randomize_(AlbertForPreTraining(config), seed).eval()


# -- shapes -----------------------------------------------------------------------------------------


def test_shapes_of_every_head(config, batch):
    B, L = batch["input_ids"].shape
    P = batch["masked_lm_positions"].shape[1]
    H = config.hidden_size

    out = AlbertModel(config)(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
    assert out.sequence_output.shape == (B, L, H) and out.pooled_output.shape == (B, H)

    pre = AlbertForPreTraining(config)(**batch)
    assert pre.mlm_logits.shape == (B, P, VOCAB) and pre.sop_logits.shape == (B, 2)
    for name in ("loss", "mlm_loss", "sop_loss", "mlm_correct", "mlm_weight", "sop_correct", "sop_count"):
        assert getattr(pre, name).shape == (), name
    no_positions = AlbertForPreTraining(config)(batch["input_ids"], batch["attention_mask"])
    assert no_positions.mlm_logits.shape == (B, L, VOCAB) and no_positions.loss is None

    inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
    for num_labels in (1, 3):
        seq = AlbertForSequenceClassification(config, num_labels=num_labels)
        labels = torch.rand(B) if num_labels == 1 else torch.randint(0, 3, (B,))
        res = seq(**inputs, labels=labels)
        assert res.logits.shape == (B, num_labels) and res.loss.shape == ()
    tok = AlbertForTokenClassification(config, num_labels=5)
    res = tok(**inputs, labels=torch.randint(0, 5, (B, L)))
    assert res.logits.shape == (B, L, 5) and res.loss.shape == ()
    assert tok.albert.pooler is None


def test_single_sentence_and_pair_inputs_differ_only_through_token_types(config, batch):
    model = AlbertForSequenceClassification(config, num_labels=2).eval()
    single = model(batch["input_ids"], batch["attention_mask"]).logits
    pair = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]).logits
    zeros = model(
        batch["input_ids"], batch["attention_mask"], torch.zeros_like(batch["token_type_ids"])
    ).logits
    torch.testing.assert_close(single, zeros)
    assert not torch.allclose(single, pair)


def test_sequence_regression_uses_mse_and_classification_cross_entropy(config, batch):
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask")}
    reg = AlbertForSequenceClassification(config, num_labels=1).eval()
    target = torch.tensor([0.5, -1.0, 2.0])
    out = reg(**inputs, labels=target)
    torch.testing.assert_close(out.loss, ((out.logits.squeeze(-1) - target) ** 2).mean())
    cls = AlbertForSequenceClassification(config, num_labels=3).eval()
    labels = torch.tensor([0, 2, 1])
    out = cls(**inputs, labels=labels)
    torch.testing.assert_close(out.loss, F.cross_entropy(out.logits, labels))


def test_token_classification_ignores_padding_and_minus_100(config, batch):
    model = AlbertForTokenClassification(config, num_labels=4).eval()
    labels = torch.randint(0, 4, batch["input_ids"].shape)
    labels[0, 1] = -100
    out = model(batch["input_ids"], batch["attention_mask"], labels=labels)
    keep = (batch["attention_mask"] == 1) & (labels != -100)
    torch.testing.assert_close(out.loss, F.cross_entropy(out.logits[keep], labels[keep]))


# -- masking -----------------------------------------------------------------------------------------


def test_padding_does_not_change_outputs_at_real_positions(config):
    model = pretraining_model(config)
    torch.manual_seed(0)
    ids = torch.randint(5, VOCAB, (1, 7))
    types = torch.tensor([[0, 0, 0, 1, 1, 1, 1]])
    positions = torch.tensor([[1, 3, 5]])
    short = model(ids, torch.ones_like(ids), types, positions)
    short_seq = model.albert(ids, torch.ones_like(ids), types).sequence_output

    pad = 5  # random (non-zero) ids in the padding: only the mask may hide them
    ids_long = torch.cat([ids, torch.randint(5, VOCAB, (1, pad))], 1)
    mask_long = torch.cat([torch.ones_like(ids), torch.zeros(1, pad, dtype=torch.long)], 1)
    types_long = torch.cat([types, torch.ones(1, pad, dtype=torch.long)], 1)
    long = model(ids_long, mask_long, types_long, positions)
    long_seq = model.albert(ids_long, mask_long, types_long).sequence_output

    torch.testing.assert_close(long.mlm_logits, short.mlm_logits, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(long.sop_logits, short.sop_logits, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(long_seq[:, :7], short_seq, atol=1e-5, rtol=1e-5)
    # ... and without the mask the padding does leak in (the test would notice a mask that does nothing).
    unmasked = model(ids_long, torch.ones_like(ids_long), types_long, positions)
    assert not torch.allclose(unmasked.mlm_logits, short.mlm_logits, atol=1e-4)


def test_pruned_last_layer_equals_full_computation(batch):
    # The pretraining path evaluates the last layer only at [CLS] + masked positions: must be exact.
    config = tiny_config(num_hidden_layers=3)
    model = pretraining_model(config)
    out = model(**batch)
    full = model.albert(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
    expected = model.predictions(gather_positions(full.sequence_output, batch["masked_lm_positions"]))
    torch.testing.assert_close(out.mlm_logits, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out.sop_logits, model.sop_classifier(full.pooled_output), atol=1e-5, rtol=1e-5)


# -- tied weights ---------------------------------------------------------------------------------------


def test_decoder_is_tied_to_word_embeddings(config, batch):
    model = AlbertForPreTraining(config)
    emb, dec = model.albert.embeddings.word_embeddings.weight, model.predictions.decoder.weight
    assert dec is emb and dec.data_ptr() == emb.data_ptr()
    assert model.predictions.decoder.bias is model.predictions.bias
    assert sum(1 for _ in model.parameters()) == len(model.state_dict()) - 2  # two tied aliases

    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    model(**batch).loss.backward()
    # Rows never looked up by the input get a gradient only through the decoder: the tie carries it.
    unused = sorted(set(range(VOCAB)) - set(batch["input_ids"].flatten().tolist()))
    assert emb.grad[unused].abs().sum() > 0
    before = emb.detach().clone()
    opt.step()
    assert not torch.equal(before, emb)
    assert torch.equal(model.predictions.decoder.weight, model.albert.embeddings.word_embeddings.weight)
    model.to(torch.float64)
    assert model.predictions.decoder.weight is model.albert.embeddings.word_embeddings.weight


# -- losses ------------------------------------------------------------------------------------------


def _gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def test_loss_equals_hand_computation(config, batch):
    model = pretraining_model(config).requires_grad_(False)
    batch = dict(batch)
    batch["masked_lm_weights"] = batch["masked_lm_weights"] * torch.tensor([1.0, 0.5, 1.0])[:, None]
    out = model(**batch)

    # MLM logits by hand from the backbone: dense, tanh-GELU, LayerNorm, tied decoder + bias.
    full = model.albert(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
    h = gather_positions(full.sequence_output, batch["masked_lm_positions"])
    p = model.predictions
    t = _gelu_tanh(h @ p.dense.weight.T + p.dense.bias)
    t = (t - t.mean(-1, keepdim=True)) / torch.sqrt(t.var(-1, unbiased=False, keepdim=True) + 1e-12)
    t = t * p.LayerNorm.weight + p.LayerNorm.bias
    logits = t @ model.albert.embeddings.word_embeddings.weight.T + p.bias
    torch.testing.assert_close(out.mlm_logits, logits, atol=1e-5, rtol=1e-5)

    # Loss: sum(w * -log softmax[target]) / sum(w), plus the SOP mean cross-entropy.
    num = den = correct = 0.0
    for b in range(logits.shape[0]):
        for j in range(logits.shape[1]):
            w = float(batch["masked_lm_weights"][b, j])
            row = logits[b, j].double()
            target = int(batch["masked_lm_ids"][b, j])
            nll = -(row[target] - torch.log(torch.exp(row).sum()))
            num += w * float(nll)
            den += w
            correct += w * float(int(row.argmax()) == target)
    sop = out.sop_logits.double()
    sop_nll = [
        -(sop[b, int(y)] - torch.log(torch.exp(sop[b]).sum()))
        for b, y in enumerate(batch["sentence_order_label"])
    ]
    sop_loss = float(sum(sop_nll)) / len(sop_nll)
    assert out.mlm_loss.item() == pytest.approx(num / den, rel=1e-5)
    assert out.sop_loss.item() == pytest.approx(sop_loss, rel=1e-5)
    assert out.loss.item() == pytest.approx(num / den + sop_loss, rel=1e-5)
    assert out.mlm_weight.item() == pytest.approx(den)
    assert out.mlm_correct.item() == pytest.approx(correct)
    sop_correct = (out.sop_logits.argmax(-1) == batch["sentence_order_label"]).sum().item()
    assert out.sop_correct.item() == sop_correct and out.sop_count.item() == 3


def test_padded_predictions_do_not_count(config, batch):
    model = pretraining_model(config)
    out = model(**batch)
    changed = dict(batch)
    ids = batch["masked_lm_ids"].clone()
    ids[batch["masked_lm_weights"] == 0] = 7  # labels of weight-0 slots must not matter
    changed["masked_lm_ids"] = ids
    torch.testing.assert_close(model(**changed).mlm_loss, out.mlm_loss)
    nothing = dict(batch, masked_lm_weights=torch.zeros_like(batch["masked_lm_weights"]))
    assert model(**nothing).mlm_loss.item() == 0.0


def test_sop_label_accepts_schema_shape(config, batch):
    model = pretraining_model(config)
    a = model(**batch)
    b = model(
        **dict(batch, sentence_order_label=batch["sentence_order_label"][:, None])
    )  # [B, 1] as in TFRecords
    torch.testing.assert_close(a.loss, b.loss)


def test_loss_goes_down_on_a_repeated_batch(config, batch):
    torch.manual_seed(0)
    model = AlbertForPreTraining(config)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(30):
        loss = model(**batch).loss
        losses.append(loss.item())
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert losses[-1] < 0.5 * losses[0]


# -- sharing ------------------------------------------------------------------------------------------


def _layer_counts(config: AlbertConfig) -> tuple[int, int, int]:
    H, F_ = config.hidden_size, config.intermediate_size
    attention = 4 * (H * H + H) + 2 * H
    ffn = H * F_ + F_ + F_ * H + H + 2 * H  # ffn, ffn_output, full_layer_layer_norm
    return attention, ffn, attention + ffn


def _outside_layers(config: AlbertConfig) -> int:
    V, E, H = config.vocab_size, config.embedding_size, config.hidden_size
    embeddings = (V + config.max_position_embeddings + config.type_vocab_size) * E + 2 * E
    return embeddings + (E * H + H) + (H * H + H)  # + embedding_hidden_mapping_in + pooler


@pytest.mark.parametrize("sharing", ["all", "attention", "ffn", "none"])
def test_sharing_modes_really_share(sharing):
    config = AlbertConfig.from_preset("tiny", vocab_size=VOCAB, num_hidden_layers=3, sharing=sharing)
    model = AlbertModel(config)
    layers = model.encoder.layers()
    assert len(layers) == 3
    same_attention = all(layer.attention.query.weight is layers[0].attention.query.weight for layer in layers)
    same_ffn = all(layer.ffn.weight is layers[0].ffn.weight for layer in layers)
    same_ln = all(
        layer.full_layer_layer_norm.weight is layers[0].full_layer_layer_norm.weight for layer in layers
    )
    assert same_attention == (sharing in ("all", "attention"))
    assert same_ffn == same_ln == (sharing in ("all", "ffn"))

    attention, ffn, layer = _layer_counts(config)
    per_mode = {"all": layer, "attention": attention + 3 * ffn, "ffn": ffn + 3 * attention, "none": 3 * layer}
    assert model.num_parameters() == _outside_layers(config) + per_mode[sharing]


def test_shared_parameter_gets_gradient_from_every_layer():
    config = tiny_config(num_hidden_layers=3)
    torch.manual_seed(0)
    model = AlbertModel(config)
    ids = torch.randint(5, VOCAB, (2, 6))
    w = model.encoder.albert_layer_groups[0].albert_layers[0].ffn.weight
    model(ids).sequence_output.sum().backward()
    total = w.grad.clone()
    # Recompute the gradient layer by layer with autograd on per-layer copies: they must sum to it.
    x = model.embeddings(ids)
    x = model.encoder.embedding_hidden_mapping_in(x)
    grads = []
    for layer in model.encoder.layers():
        copy = w.detach().clone().requires_grad_(True)
        out = F.linear(layer.attention(x, None), copy, layer.ffn.bias)
        h = layer.full_layer_layer_norm(layer.attention(x, None) + layer.ffn_output(layer.activation(out)))
        grads.append((copy, h))
        x = h
    x.sum().backward()
    torch.testing.assert_close(sum(c.grad for c, _ in grads), total, atol=1e-5, rtol=1e-4)


def test_groups_follow_int_i_over_l_over_g():
    config = tiny_config(num_hidden_layers=6, num_hidden_groups=3, inner_group_num=2)
    model = AlbertModel(config)
    groups = model.encoder.albert_layer_groups
    expected = []
    for i in range(6):
        expected += list(groups[int(i / (6 / 3))].albert_layers)
    assert [id(m) for m in model.encoder.layers()] == [id(m) for m in expected]
    assert len(model.encoder.layers()) == 12  # every application runs both inner layers


# -- init ---------------------------------------------------------------------------------------------


def test_init_truncated_normal_layernorm_one_bias_zero():
    config = AlbertConfig.from_preset("tiny", vocab_size=2000)
    torch.manual_seed(0)
    model = AlbertForPreTraining(config)
    w = model.albert.embeddings.word_embeddings.weight
    assert w.abs().max() <= 2 * config.initializer_range + 1e-7  # cut at 2 std
    assert 0.8 * config.initializer_range < w.std() < config.initializer_range
    ffn = model.albert.encoder.albert_layer_groups[0].albert_layers[0].ffn
    assert 0.8 * config.initializer_range < ffn.weight.std() < config.initializer_range
    assert torch.all(ffn.bias == 0) and torch.all(model.predictions.bias == 0)
    ln = model.albert.embeddings.LayerNorm
    assert torch.all(ln.weight == 1) and torch.all(ln.bias == 0)


# -- parameter counts ------------------------------------------------------------------------------------

PAPER = {
    "base": 12e6,
    "large": 18e6,
    "xlarge": 60e6,
    "xxlarge": 235e6,
    "bert_base": 108e6,
    "bert_large": 334e6,
}


def _meta_count(config: AlbertConfig) -> int:
    with torch.device("meta"):
        return AlbertModel(config).num_parameters()


@pytest.mark.parametrize("name", sorted(PAPER))
def test_parameter_counts_match_paper(name):
    count = _meta_count(AlbertConfig.from_preset(name, vocab_size=30000))
    assert abs(count - PAPER[name]) / PAPER[name] < 0.06, count


def test_tiny_preset_is_about_4m():
    assert abs(_meta_count(AlbertConfig.tiny()) - 4e6) / 4e6 < 0.06


def test_sharing_ablation_counts_match_paper_table():
    # ALBERT paper, Table 4 (ALBERT-base, E = 128 and E = 768).
    paper = {
        128: {"all": 12e6, "attention": 64e6, "ffn": 38e6, "none": 89e6},
        768: {"all": 31e6, "attention": 83e6, "ffn": 57e6, "none": 108e6},
    }
    for E, rows in paper.items():
        for sharing, expected in rows.items():
            count = _meta_count(AlbertConfig.from_preset("base", embedding_size=E, sharing=sharing))
            assert abs(count - expected) / expected < 0.06, (E, sharing, count)


def test_parameter_counts_equal_transformers():
    transformers = pytest.importorskip("transformers")
    for name in ("base", "large", "xlarge", "xxlarge", "bert_base", "bert_large", "tiny"):
        config = AlbertConfig.from_preset(name, vocab_size=30000)
        hf_config = transformers.AlbertConfig(**config.to_hf_dict())
        with torch.device("meta"):
            theirs = sum(p.numel() for p in transformers.AlbertModel(hf_config).parameters())
            ours = AlbertModel(config).num_parameters()
            ours_pre = AlbertForPreTraining(config).num_parameters()
            theirs_pre = sum(p.numel() for p in transformers.AlbertForPreTraining(hf_config).parameters())
        assert ours == theirs, name
        assert ours_pre == theirs_pre, name


# -- FLOPs ---------------------------------------------------------------------------------------------


def test_model_flops_per_token():
    c = AlbertConfig.base()
    H, E, F_, V, L = 768, 128, 3072, 30000, 128
    forward = 12 * (2 * (4 * H * H + 2 * H * F_) + 4 * L * H) + 2 * E * H + (20 / L) * 2 * (H * E + E * V)
    forward += 2 * (H * H + 2 * H) / L
    assert model_flops_per_token(c, L, predictions_per_seq=20) == pytest.approx(3 * forward)
    assert model_flops_per_token(c, L, 20, training=False) == pytest.approx(forward)
    # Sharing does not save compute: the count is per applied layer, the same for BERT-style "none".
    assert model_flops_per_token(c.replace(num_hidden_groups=12, sharing="none"), L, 20) == pytest.approx(
        3 * forward
    )
    # 6N rule of thumb: within 10% of 6 x (weights of the 12 applied layers) at short sequences.
    n_applied = 12 * (4 * H * H + 2 * H * F_)
    assert abs(model_flops_per_token(c, 16, 2) - 6 * n_applied) / (6 * n_applied) < 0.1

"""Checkpoint folders (safetensors) and the transformers interchange, including output parity."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from core.errors import UserError
from flows.cli import main as cli
from model.albert import AlbertForPreTraining, AlbertModel
from model.classifiers import AlbertForSequenceClassification
from model.config import AlbertConfig
from model.convert import (
    SPM_NAME,
    WEIGHTS_NAME,
    export_hf,
    load_pretrained,
    load_state,
    save_pretrained,
    tied_aliases,
)
from tests.model.tiny import VOCAB, randomize_, tiny_config, toy_batch


def _model(config: AlbertConfig, seed: int = 0) -> AlbertForPreTraining:
    # O(1) activations and non-trivial LayerNorms and biases: a mix-up of any of them shows in outputs.
    return randomize_(AlbertForPreTraining(config), seed).eval()


def _hf_config(config: AlbertConfig):
    transformers = pytest.importorskip("transformers")
    return transformers.AlbertConfig(**{k: v for k, v in config.to_hf_dict().items() if k != "sharing"})


# -- folder format ------------------------------------------------------------------------------------


def test_save_load_round_trip_keeps_weights_and_ties(tmp_path, batch):
    model = _model(tiny_config(num_hidden_layers=3))
    save_pretrained(model, tmp_path / "ckpt")
    stored = load_file(str(tmp_path / "ckpt" / WEIGHTS_NAME))
    assert "predictions.decoder.weight" not in stored and "albert.embeddings.word_embeddings.weight" in stored
    loaded = load_pretrained(tmp_path / "ckpt").eval()
    assert type(loaded) is AlbertForPreTraining
    assert loaded.predictions.decoder.weight is loaded.albert.embeddings.word_embeddings.weight
    for k, v in model.state_dict().items():
        assert torch.equal(v, loaded.state_dict()[k]), k
    torch.testing.assert_close(loaded(**batch).loss, model(**batch).loss)


@pytest.mark.parametrize("sharing", ["attention", "ffn", "none"])
def test_partial_sharing_round_trip(tmp_path, sharing, batch):
    config = tiny_config(num_hidden_layers=3, num_hidden_groups=3, sharing=sharing)
    model = _model(config)
    save_pretrained(model, tmp_path)
    stored = load_file(str(tmp_path / WEIGHTS_NAME))
    assert not set(tied_aliases(model)) & set(stored)  # each shared tensor stored once
    loaded = load_pretrained(tmp_path).eval()
    assert loaded.config.sharing == sharing
    layers = loaded.albert.encoder.layers()
    assert (layers[2].attention is layers[0].attention) == (sharing == "attention")
    torch.testing.assert_close(loaded(**batch).mlm_logits, model(**batch).mlm_logits)


def test_fine_tuning_model_loads_pretrained_backbone(tmp_path, batch):
    model = _model(tiny_config())
    save_pretrained(model, tmp_path)
    clf = load_pretrained(tmp_path, AlbertForSequenceClassification, num_labels=3)
    assert clf.classifier.out_features == 3
    for k, v in model.albert.state_dict().items():
        assert torch.equal(v, clf.albert.state_dict()[k]), k
    backbone = load_pretrained(tmp_path, AlbertModel)
    assert torch.equal(backbone.pooler.weight, model.albert.pooler.weight)
    # A fine-tuned folder remembers its class and head width.
    save_pretrained(clf, tmp_path / "clf")
    again = load_pretrained(tmp_path / "clf")
    assert type(again) is AlbertForSequenceClassification and again.num_labels == 3
    assert torch.equal(again.classifier.weight, clf.classifier.weight)


def test_load_errors_name_the_problem(tmp_path):
    with pytest.raises(UserError, match="not found"):
        load_pretrained(tmp_path / "nothing")
    (tmp_path / "half").mkdir()
    with pytest.raises(UserError, match="model.safetensors is missing"):
        save_pretrained(_model(tiny_config()), tmp_path / "half")
        (tmp_path / "half" / WEIGHTS_NAME).unlink()
        load_pretrained(tmp_path / "half")
    model = AlbertForPreTraining(tiny_config())
    state = {k: v for k, v in model.state_dict().items() if "pooler" not in k}
    with pytest.raises(UserError, match="missing albert.pooler.bias, albert.pooler.weight"):
        load_state(model, state)
    with pytest.raises(UserError, match="unexpected bert.extra"):
        load_state(model, {**model.state_dict(), "bert.extra": torch.zeros(1)})
    bad = dict(model.state_dict())
    bad["albert.pooler.weight"] = torch.zeros(3, 3)
    with pytest.raises(UserError, match=r"albert.pooler.weight has shape \(3, 3\)"):
        load_state(model, bad)


def test_checkpoint_spm_model_is_copied(tmp_path):
    spm_file = tmp_path / "vocab.model"
    spm_file.write_bytes(b"not really a model")
    save_pretrained(_model(tiny_config()), tmp_path / "ckpt", spm_model_path=spm_file)
    assert (tmp_path / "ckpt" / SPM_NAME).read_bytes() == b"not really a model"
    with pytest.raises(UserError, match="SentencePiece model not found"):
        save_pretrained(_model(tiny_config()), tmp_path / "ckpt2", spm_model_path=tmp_path / "none.model")


def test_model_package_imports_without_transformers():
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['transformers'] = None; sys.modules['tensorflow'] = None\n"
        "import model.albert, model.config, model.convert, model.convert_tf, benchmarks.model\n"
        "import model.export_command, model.import_command\n"
        "assert 'transformers' not in [m for m in sys.modules if sys.modules[m] is not None]"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -- transformers parity -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides",
    [
        dict(),
        dict(num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2, hidden_act="relu"),
        dict(hidden_act="gelu"),  # transformers' exact GELU
    ],
    ids=["albert", "groups", "exact-gelu"],
)
def test_outputs_match_transformers(overrides):
    transformers = pytest.importorskip("transformers")
    config = tiny_config(**overrides)
    ours = _model(config)
    theirs = transformers.AlbertForPreTraining(_hf_config(config)).eval()
    assert list(ours.state_dict()) == list(theirs.state_dict())  # identical keys, in the same order
    theirs.load_state_dict(ours.state_dict())
    batch = toy_batch(B=3, L=12, P=4, seed=1)
    with torch.no_grad():
        a = ours(**batch)
        b = theirs(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            token_type_ids=batch["token_type_ids"],
        )
        base_a = ours.albert(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
    positions = batch["masked_lm_positions"]
    at_masked = torch.gather(b.prediction_logits, 1, positions[..., None].expand(-1, -1, VOCAB))
    assert (a.mlm_logits - at_masked).abs().max() <= 1e-4
    assert (a.sop_logits - b.sop_logits).abs().max() <= 1e-4
    real = batch["attention_mask"].bool()
    hf_seq = theirs.albert(
        input_ids=batch["input_ids"],
        attention_mask=batch["attention_mask"],
        token_type_ids=batch["token_type_ids"],
    ).last_hidden_state
    assert (base_a.sequence_output[real] - hf_seq.detach()[real]).abs().max() <= 1e-4

    # Loss: transformers averages MLM CE over labelled positions (weights 1) + SOP CE.
    labels = torch.full_like(batch["input_ids"], -100)
    w = batch["masked_lm_weights"].bool()
    labels.scatter_(1, positions, torch.where(w, batch["masked_lm_ids"], torch.full_like(positions, -100)))
    labels[:, 0] = -100  # position 0 is padding-prediction filler in our batch, never a label
    with torch.no_grad():
        hf_loss = theirs(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            token_type_ids=batch["token_type_ids"],
            labels=labels,
            sentence_order_label=batch["sentence_order_label"],
        ).loss
    assert abs(a.loss.item() - hf_loss.item()) <= 1e-4


def test_classification_heads_match_transformers(batch):
    transformers = pytest.importorskip("transformers")
    config = tiny_config()
    torch.manual_seed(0)
    ours = AlbertForSequenceClassification(config, num_labels=3).eval()
    hf_config = _hf_config(config)
    hf_config.num_labels = 3
    theirs = transformers.AlbertForSequenceClassification(hf_config).eval()
    theirs.load_state_dict(ours.state_dict())
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
    with torch.no_grad():
        torch.testing.assert_close(ours(**inputs).logits, theirs(**inputs).logits, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("sharing", ["all", "attention", "none"])
def test_export_hf_loads_in_transformers_with_same_outputs(tmp_path, sharing):
    transformers = pytest.importorskip("transformers")
    if sharing == "all":
        config = tiny_config(num_hidden_layers=3)
    else:
        config = tiny_config(num_hidden_layers=3, num_hidden_groups=3, sharing=sharing)
    model = _model(config)
    save_pretrained(model, tmp_path / "ckpt")
    assert (
        cli(
            [
                "export",
                "--checkpoint",
                str(tmp_path / "ckpt"),
                "--format",
                "hf",
                "--out",
                str(tmp_path / "hf"),
            ]
        )
        == 0
    )
    hf_json = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert (
        hf_json["model_type"] == "albert" and hf_json["hidden_act"] == "gelu_new" and "sharing" not in hf_json
    )
    theirs, info = transformers.AlbertForPreTraining.from_pretrained(
        tmp_path / "hf", output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"], info
    theirs.eval()
    batch = toy_batch(seed=2)
    with torch.no_grad():
        a = model(**batch)
        b = theirs(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            token_type_ids=batch["token_type_ids"],
        )
    at_masked = torch.gather(
        b.prediction_logits, 1, batch["masked_lm_positions"][..., None].expand(-1, -1, VOCAB)
    )
    assert (a.mlm_logits - at_masked).abs().max() <= 1e-4
    assert (a.sop_logits - b.sop_logits).abs().max() <= 1e-4


def test_export_hf_includes_a_loadable_tokenizer(tmp_path):
    transformers = pytest.importorskip("transformers")
    spm = pytest.importorskip("sentencepiece")
    text = tmp_path / "text.txt"
    text.write_text(
        "\n".join(f"the quick brown fox {i} jumps over the lazy dog number {i}" for i in range(200))
    )
    spm.SentencePieceTrainer.train(
        input=str(text),
        model_prefix=str(tmp_path / "sp"),
        vocab_size=VOCAB,
        pad_id=0,
        unk_id=1,
        bos_id=-1,
        eos_id=-1,
        control_symbols=["[CLS]", "[SEP]", "[MASK]"],
        minloglevel=2,
    )
    save_pretrained(_model(tiny_config()), tmp_path / "ckpt", spm_model_path=tmp_path / "sp.model")
    out = Path(export_hf(tmp_path / "ckpt", tmp_path / "hf"))
    assert (out / SPM_NAME).is_file() and (out / "spiece.model").is_file()
    sp = spm.SentencePieceProcessor(model_file=str(tmp_path / "sp.model"))
    tok_config = json.loads((out / "tokenizer_config.json").read_text())
    assert tok_config["tokenizer_class"] == "AlbertTokenizer"
    assert tok_config["pad_token"] == sp.id_to_piece(0) and tok_config["unk_token"] == sp.id_to_piece(1)
    assert (tok_config["cls_token"], tok_config["sep_token"], tok_config["mask_token"]) == (
        "[CLS]",
        "[SEP]",
        "[MASK]",
    )
    tok = transformers.AutoTokenizer.from_pretrained(out)  # reads spiece.model through protobuf
    ids = tok("the lazy dog")["input_ids"]
    assert ids[0] == sp.piece_to_id("[CLS]") and ids[-1] == sp.piece_to_id("[SEP]")
    assert ids[1:-1] == sp.encode("the lazy dog")

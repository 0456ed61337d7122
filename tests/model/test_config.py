"""AlbertConfig: presets, validation, and both file formats."""

from __future__ import annotations

import json

import pytest

from core.errors import UserError
from model.config import PRESETS, AlbertConfig, ConfigError, load_config
from tests.model.tiny import tiny_config


def test_presets_match_reference_table():
    expected = {  # docs/albert.md §3: L, H, E, heads, FFN
        "base": (12, 768, 128, 12, 3072),
        "large": (24, 1024, 128, 16, 4096),
        "xlarge": (24, 2048, 128, 16, 8192),
        "xxlarge": (12, 4096, 128, 64, 16384),
        "bert_base": (12, 768, 768, 12, 3072),
        "bert_large": (24, 1024, 1024, 16, 4096),
        "tiny": (4, 312, 128, 12, 1248),
    }
    for name, (L, H, E, heads, ffn) in expected.items():
        c = AlbertConfig.from_preset(name)
        assert (c.num_hidden_layers, c.hidden_size, c.embedding_size, c.num_attention_heads) == (
            L,
            H,
            E,
            heads,
        )
        assert c.intermediate_size == ffn
    assert AlbertConfig.tiny().vocab_size == 21128
    assert AlbertConfig.base().sharing == "all" and AlbertConfig.base().num_hidden_groups == 1
    assert AlbertConfig.bert_base().sharing == "none" and AlbertConfig.bert_base().num_hidden_groups == 12
    assert AlbertConfig() == AlbertConfig.tiny()  # the defaults are the tiny debug model
    assert set(PRESETS) == set(expected)


def test_from_preset_overrides_and_sharing_switch():
    c = AlbertConfig.from_preset("base", vocab_size=1000, hidden_dropout_prob=0.1)
    assert c.vocab_size == 1000 and c.hidden_dropout_prob == 0.1 and c.hidden_size == 768
    ffn = AlbertConfig.from_preset("base", sharing="ffn")
    assert ffn.num_hidden_groups == 12 and ffn.inner_group_num == 1
    assert AlbertConfig.from_preset("bert-base") == AlbertConfig.bert_base()
    with pytest.raises(ConfigError, match="unknown preset"):
        AlbertConfig.from_preset("huge")
    with pytest.raises(ConfigError, match="unknown config field"):
        AlbertConfig.from_preset("base", hidden=3)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(hidden_size=30, num_attention_heads=4), "not divisible by num_attention_heads"),
        (dict(num_hidden_layers=3, num_hidden_groups=2), "must divide num_hidden_layers"),
        (dict(num_hidden_layers=2, num_hidden_groups=4), "must divide num_hidden_layers"),
        (dict(hidden_act="gelu_fancy"), "unknown hidden_act"),
        (dict(sharing="some"), "unknown sharing"),
        (dict(sharing="ffn"), "one group per layer"),
        (dict(vocab_size=0), "vocab_size must be a positive integer"),
        (dict(hidden_size=16.0), "hidden_size must be a positive integer"),
        (dict(hidden_dropout_prob=1.0), r"hidden_dropout_prob must be in \[0, 1\)"),
        (dict(initializer_range=0), "initializer_range must be > 0"),
        (dict(pad_token_id=64), "outside the vocabulary"),
    ],
)
def test_bad_configs_fail_with_clear_errors(overrides, message):
    with pytest.raises(ConfigError, match=message):
        tiny_config(**overrides)


def test_config_error_is_a_user_error():
    assert issubclass(ConfigError, UserError) and issubclass(ConfigError, ValueError)


def test_hf_round_trip(tmp_path):
    c = tiny_config(num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2, hidden_act="relu")
    path = tmp_path / "config.json"
    c.to_json_file(path)
    data = json.loads(path.read_text())
    assert data["model_type"] == "albert" and data["architectures"] == ["AlbertForPreTraining"]
    assert "sharing" not in data  # "all" is transformers' own layout: no extension key
    assert AlbertConfig.from_json_file(path) == c
    partial = AlbertConfig.from_preset("base", sharing="attention")
    assert AlbertConfig.from_hf_dict(partial.to_hf_dict()) == partial


def test_hf_dict_keeps_unknown_keys_but_drops_head_labels():
    data = {**tiny_config().to_hf_dict(), "bos_token_id": 7, "id2label": {"0": "a", "1": "b", "2": "c"}}
    c = AlbertConfig.from_hf_dict(data)
    out = c.to_hf_dict()
    assert out["bos_token_id"] == 7
    assert "id2label" not in out  # the SOP head of transformers reads num_labels: never carry a head's width


def test_google_round_trip_and_gelu_meaning(tmp_path):
    c = tiny_config()
    assert c.hidden_act == "gelu_new"
    path = tmp_path / "albert_config.json"
    c.to_json_file(path, format="google")
    data = json.loads(path.read_text())
    assert data["hidden_act"] == "gelu"  # the TF code's "gelu" IS the tanh approximation
    assert "model_type" not in data
    assert AlbertConfig.from_json_file(path) == c  # auto-detected as Google's format


def test_reads_original_albert_config_files(tmp_path):
    google_base = {  # albert_base v2 albert_config.json as released
        "attention_probs_dropout_prob": 0,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0,
        "embedding_size": 128,
        "hidden_size": 768,
        "initializer_range": 0.02,
        "intermediate_size": 3072,
        "max_position_embeddings": 512,
        "num_attention_heads": 12,
        "num_hidden_layers": 12,
        "num_hidden_groups": 1,
        "net_structure_type": 0,
        "gap_size": 0,
        "num_memory_blocks": 0,
        "inner_group_num": 1,
        "down_scale_factor": 1,
        "type_vocab_size": 2,
        "vocab_size": 30000,
    }
    path = tmp_path / "albert_config.json"
    path.write_text(json.dumps(google_base))
    assert AlbertConfig.from_json_file(path) == AlbertConfig.base()
    zh = {
        **google_base,
        "hidden_act": "relu",
        "directionality": "bidi",
        "ln_type": "postln",
        "vocab_size": 21128,
    }
    path.write_text(json.dumps(zh))
    assert AlbertConfig.from_json_file(path).hidden_act == "relu"
    path.write_text(json.dumps({**google_base, "net_structure_type": 1}))
    with pytest.raises(ConfigError, match="net_structure_type"):
        AlbertConfig.from_json_file(path)
    path.write_text(json.dumps({**google_base, "ln_type": "preln"}))
    with pytest.raises(ConfigError, match="ln_type"):
        AlbertConfig.from_json_file(path)


def test_transformers_gelu_is_exact_and_cannot_be_written_as_google(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**tiny_config().to_hf_dict(), "hidden_act": "gelu"}))
    c = AlbertConfig.from_json_file(path)
    assert c.hidden_act == "gelu"  # transformers' "gelu" is erf GELU: not the Google meaning
    with pytest.raises(ConfigError, match="no name in the original TF code"):
        c.to_google_dict()
    with pytest.raises(ConfigError, match="no albert_config.json form"):
        AlbertConfig.from_preset("base", sharing="ffn").to_google_dict()


def test_replace_validates_and_copies_extra():
    c = AlbertConfig.from_hf_dict({**tiny_config().to_hf_dict(), "bos_token_id": 7})
    d = c.replace(hidden_act="relu")
    d.extra["bos_token_id"] = 8
    assert c.extra["bos_token_id"] == 7
    with pytest.raises(ConfigError, match="not divisible"):
        c.replace(num_attention_heads=5)


def test_file_errors(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        AlbertConfig.from_json_file(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="cannot read"):
        AlbertConfig.from_json_file(bad)
    bad.write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(ConfigError, match="model_type"):
        AlbertConfig.from_json_file(bad)


def test_load_config_accepts_preset_or_file(tmp_path):
    assert load_config("base") == AlbertConfig.base()
    path = tmp_path / "c.json"
    tiny_config().to_json_file(path)
    assert load_config(path) == tiny_config()
    with pytest.raises(ConfigError, match="neither a preset"):
        load_config(tmp_path / "nope.json")

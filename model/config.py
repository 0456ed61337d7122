"""`AlbertConfig`: the one typed config of the ALBERT model, its presets, and its two file formats.

Field names are those of transformers' `AlbertConfig`, so a transformers `config.json` maps onto it
field by field. Two file formats are read and written:

- transformers `config.json` (`model_type: "albert"`): the checkpoint folder format of this project.
- google-research `albert_config.json`: the original TF release (and the Google-layout albert_zh).
  There `"gelu"` means the tanh approximation, which transformers (and this class) call `"gelu_new"`;
  exact erf GELU is `"gelu"` in transformers' naming. Reading a Google config as exact GELU would
  change every output by ~1e-3, so the two formats are never guessed from the activation name.

Sharing (the paper's ablation, ALBERT §4.5):

- `"all"`: ALBERT. `num_hidden_groups` groups of `inner_group_num` layers; hidden layer i runs group
  `int(i / (num_hidden_layers / num_hidden_groups))`. Usually one group shared by every layer.
- `"attention"` / `"ffn"` / `"none"`: one group per layer (`num_hidden_groups == num_hidden_layers`,
  `inner_group_num == 1`); with `"attention"` every group's `attention` sub-module is the same module
  object as group 0's, with `"ffn"` the `ffn`, `ffn_output` and `full_layer_layer_norm` are. `"none"` is
  BERT-style (nothing shared), which transformers loads as is.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from core.errors import UserError

Sharing = Literal["all", "attention", "ffn", "none"]
SHARING_MODES: tuple[str, ...] = ("all", "attention", "ffn", "none")

# Activation names as transformers spells them ("gelu" = exact erf GELU, "gelu_new" = tanh approximation).
ACTIVATIONS: tuple[str, ...] = ("gelu_new", "gelu_pytorch_tanh", "gelu", "relu", "tanh", "silu", "swish")

# google-research/albert modeling.get_activation -> transformers name. Its "gelu" is the tanh form.
_GOOGLE_TO_ACT = {"gelu": "gelu_new", "relu": "relu", "tanh": "tanh"}
_ACT_TO_GOOGLE = {"gelu_new": "gelu", "gelu_pytorch_tanh": "gelu", "relu": "relu", "tanh": "tanh"}

# Keys of the original configs that describe variants this model does not implement: value it must have.
_GOOGLE_UNSUPPORTED = {"net_structure_type": 0, "gap_size": 0, "num_memory_blocks": 0, "down_scale_factor": 1}


class ConfigError(UserError, ValueError):
    """An invalid model configuration (bad value, inconsistent sizes, unknown preset or file)."""


@dataclass
class AlbertConfig:
    """ALBERT hyper-parameters. Defaults are albert_zh tiny: runs anywhere in seconds."""

    vocab_size: int = 21128
    """Rows of the word-embedding table (and columns of the tied MLM decoder)."""
    embedding_size: int = 128
    """E: width of the factorized embeddings, projected to H by `embedding_hidden_mapping_in`."""
    hidden_size: int = 312
    """H: width of the transformer layers."""
    num_hidden_layers: int = 4
    """L: how many times a layer group is applied (depth of the computation, not of the parameters)."""
    num_hidden_groups: int = 1
    """G: groups of distinct parameters; hidden layer i uses group int(i / (L / G))."""
    inner_group_num: int = 1
    """Layers inside one group, applied one after the other each time the group runs."""
    num_attention_heads: int = 12
    """Attention heads; must divide hidden_size."""
    intermediate_size: int = 1248
    """Width of the feed-forward inner layer."""
    hidden_act: str = "gelu_new"
    """Activation of the FFN and MLM head, in transformers' naming ("gelu_new" = tanh approximation)."""
    hidden_dropout_prob: float = 0.0
    """Dropout on embeddings and sub-layer outputs (0 in ALBERT v2 configs)."""
    attention_probs_dropout_prob: float = 0.0
    """Dropout on attention probabilities."""
    max_position_embeddings: int = 512
    """Longest sequence the position table covers."""
    type_vocab_size: int = 2
    """Token types (segment ids): 2 for sentence pairs."""
    initializer_range: float = 0.02
    """Std of the truncated-normal init (cut at 2 std, as TF's truncated_normal)."""
    layer_norm_eps: float = 1e-12
    """LayerNorm epsilon (TF's 1e-12)."""
    classifier_dropout_prob: float = 0.1
    """Dropout before the SOP and fine-tuning classifiers."""
    pad_token_id: int = 0
    """Id of the padding token (the vocabulary's pad_id). Written into config.json; the row is trained
    like any other, as in the TF reference (padded positions are excluded by the attention mask)."""
    sharing: Sharing = "all"
    """Cross-layer parameter sharing: "all" (ALBERT), "attention", "ffn" or "none" (BERT-style)."""
    extra: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """Other keys of a transformers config.json (e.g. bos/eos ids), kept so a round trip loses nothing."""

    def __post_init__(self) -> None:
        positive = (
            "vocab_size",
            "embedding_size",
            "hidden_size",
            "num_hidden_layers",
            "num_hidden_groups",
            "inner_group_num",
            "num_attention_heads",
            "intermediate_size",
            "max_position_embeddings",
            "type_vocab_size",
        )
        for name in positive:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout_prob"):
            value = getattr(self, name)
            if not 0.0 <= float(value) < 1.0:
                raise ConfigError(f"{name} must be in [0, 1), got {value!r}")
        if not float(self.initializer_range) > 0:
            raise ConfigError(f"initializer_range must be > 0, got {self.initializer_range!r}")
        if not float(self.layer_norm_eps) > 0:
            raise ConfigError(f"layer_norm_eps must be > 0, got {self.layer_norm_eps!r}")
        if self.hidden_size % self.num_attention_heads:
            raise ConfigError(
                f"hidden_size {self.hidden_size} is not divisible by num_attention_heads "
                f"{self.num_attention_heads}"
            )
        if self.hidden_act not in ACTIVATIONS:
            raise ConfigError(
                f"unknown hidden_act {self.hidden_act!r}; expected one of {', '.join(ACTIVATIONS)}"
            )
        if self.sharing not in SHARING_MODES:
            raise ConfigError(f"unknown sharing {self.sharing!r}; expected one of {', '.join(SHARING_MODES)}")
        if self.num_hidden_groups > self.num_hidden_layers or self.num_hidden_layers % self.num_hidden_groups:
            raise ConfigError(
                f"num_hidden_groups {self.num_hidden_groups} must divide num_hidden_layers "
                f"{self.num_hidden_layers}"
            )
        if self.sharing != "all" and (
            self.num_hidden_groups != self.num_hidden_layers or self.inner_group_num != 1
        ):
            raise ConfigError(
                f"sharing={self.sharing!r} uses one group per layer: set num_hidden_groups = "
                f"num_hidden_layers ({self.num_hidden_layers}) and inner_group_num = 1 "
                f"(AlbertConfig.from_preset does this for you)"
            )
        if not 0 <= self.pad_token_id < self.vocab_size:
            raise ConfigError(
                f"pad_token_id {self.pad_token_id} is outside the vocabulary ({self.vocab_size})"
            )
        self.extra = dict(self.extra)  # never share the dict between copies made by replace()

    # -- derived sizes ---------------------------------------------------------------------------------

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def replace(self, **changes: Any) -> AlbertConfig:
        """A validated copy with some fields changed (dataclasses.replace)."""
        return dataclasses.replace(self, **changes)

    # -- presets -----------------------------------------------------------------------------------------

    @classmethod
    def from_preset(cls, name: str, **overrides: Any) -> AlbertConfig:
        """A named preset (see PRESETS) with some fields overridden.

        Overriding `sharing` with anything but "all" also switches to one group per layer, unless the
        overrides set num_hidden_groups themselves.
        """
        key = name.replace("-", "_").lower()
        if key not in PRESETS:
            raise ConfigError(f"unknown preset {name!r}; expected one of {', '.join(PRESETS)}")
        values = dict(PRESETS[key])
        values.update(overrides)
        if values.get("sharing", "all") != "all" and "num_hidden_groups" not in overrides:
            values["num_hidden_groups"] = values["num_hidden_layers"]
            values["inner_group_num"] = 1
        unknown = set(values) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ConfigError(f"unknown config field(s): {', '.join(sorted(unknown))}")
        return cls(**values)

    @classmethod
    def tiny(cls, **overrides: Any) -> AlbertConfig:
        return cls.from_preset("tiny", **overrides)

    @classmethod
    def base(cls, **overrides: Any) -> AlbertConfig:
        return cls.from_preset("base", **overrides)

    @classmethod
    def large(cls, **overrides: Any) -> AlbertConfig:
        return cls.from_preset("large", **overrides)

    @classmethod
    def xlarge(cls, **overrides: Any) -> AlbertConfig:
        return cls.from_preset("xlarge", **overrides)

    @classmethod
    def xxlarge(cls, **overrides: Any) -> AlbertConfig:
        return cls.from_preset("xxlarge", **overrides)

    @classmethod
    def bert_base(cls, **overrides: Any) -> AlbertConfig:
        return cls.from_preset("bert_base", **overrides)

    @classmethod
    def bert_large(cls, **overrides: Any) -> AlbertConfig:
        return cls.from_preset("bert_large", **overrides)

    # -- transformers config.json -----------------------------------------------------------------------

    def to_hf_dict(self) -> dict[str, Any]:
        """transformers `config.json` content (model_type "albert"). A non-"all" `sharing` is kept as an
        extra key; transformers ignores it (see model.convert.to_hf_state_dict for a full export)."""
        out: dict[str, Any] = {
            "architectures": ["AlbertForPreTraining"],
            "model_type": "albert",
            "bos_token_id": 2,
            "eos_token_id": 3,
            "tie_word_embeddings": True,
        }
        out.update(self.extra)
        for f in dataclasses.fields(self):
            if f.name not in ("sharing", "extra"):
                out[f.name] = getattr(self, f.name)
        if self.sharing != "all":
            out["sharing"] = self.sharing
        return dict(sorted(out.items()))

    @classmethod
    def from_hf_dict(cls, data: dict[str, Any]) -> AlbertConfig:
        if data.get("model_type", "albert") != "albert":
            raise ConfigError(f"config.json has model_type {data.get('model_type')!r}, expected 'albert'")
        names = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        values = {k: v for k, v in data.items() if k in names}
        # Keys that describe the file or a fine-tuning head, not the backbone: dropped (a pretraining
        # model written back must keep transformers' 2-way SOP head, which reads num_labels).
        skip = {
            "model_type",
            "architectures",
            "transformers_version",
            "_name_or_path",
            "dtype",
            "torch_dtype",
        }
        skip |= {"num_labels", "id2label", "label2id"}
        extra = {k: v for k, v in data.items() if k not in names and k not in skip}
        return cls(**values, extra=extra)

    # -- google-research albert_config.json --------------------------------------------------------------

    def to_google_dict(self) -> dict[str, Any]:
        """google-research/albert `albert_config.json` content ("gelu" there = tanh approximation)."""
        if self.sharing in ("attention", "ffn"):
            raise ConfigError(
                f"sharing={self.sharing!r} has no albert_config.json form (convert_tf.export_tf writes such "
                f"models as one unshared group per layer)"
            )
        if self.hidden_act not in _ACT_TO_GOOGLE:
            raise ConfigError(
                f"hidden_act {self.hidden_act!r} has no name in the original TF code "
                f"(it knows gelu = tanh approximation, relu, tanh)"
            )
        return {
            "attention_probs_dropout_prob": self.attention_probs_dropout_prob,
            "embedding_size": self.embedding_size,
            "hidden_act": _ACT_TO_GOOGLE[self.hidden_act],
            "hidden_dropout_prob": self.hidden_dropout_prob,
            "hidden_size": self.hidden_size,
            "initializer_range": self.initializer_range,
            "inner_group_num": self.inner_group_num,
            "intermediate_size": self.intermediate_size,
            "layer_norm_eps": self.layer_norm_eps,
            "max_position_embeddings": self.max_position_embeddings,
            "num_attention_heads": self.num_attention_heads,
            "num_hidden_groups": self.num_hidden_groups,
            "num_hidden_layers": self.num_hidden_layers,
            "type_vocab_size": self.type_vocab_size,
            "vocab_size": self.vocab_size,
            "net_structure_type": 0,
            "gap_size": 0,
            "num_memory_blocks": 0,
            "down_scale_factor": 1,
        }

    @classmethod
    def from_google_dict(cls, data: dict[str, Any]) -> AlbertConfig:
        for key, wanted in _GOOGLE_UNSUPPORTED.items():
            if key in data and data[key] != wanted:
                raise ConfigError(f"albert_config.json: {key}={data[key]!r} is not supported (only {wanted})")
        if str(data.get("ln_type", "postln")).lower() != "postln":
            raise ConfigError(
                f"albert_config.json: ln_type={data['ln_type']!r} is not supported (only postln)"
            )
        act = data.get("hidden_act", "gelu")
        if act not in _GOOGLE_TO_ACT:
            raise ConfigError(f"albert_config.json: unknown hidden_act {act!r}")
        names = {f.name for f in dataclasses.fields(cls)} - {"extra", "sharing", "hidden_act"}
        values = {k: v for k, v in data.items() if k in names}
        return cls(**values, hidden_act=_GOOGLE_TO_ACT[act])

    # -- files --------------------------------------------------------------------------------------------

    @classmethod
    def from_json_file(
        cls, path: str | Path, format: Literal["auto", "hf", "google"] = "auto"
    ) -> AlbertConfig:
        """Read a transformers `config.json` or a Google `albert_config.json`.

        "auto" takes a file with `model_type` or `architectures` as transformers', anything else as Google's.
        """
        from core import storage

        path = str(path)
        if not storage.isfile(path):
            raise ConfigError(f"config file not found: {path}")
        try:
            data = json.loads(storage.read_text(path))
        except (OSError, ValueError) as err:
            raise ConfigError(f"cannot read config {path}: {err}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"config {path} is not a JSON object")
        if format == "auto":
            format = "hf" if ("model_type" in data or "architectures" in data) else "google"
        try:
            return cls.from_hf_dict(data) if format == "hf" else cls.from_google_dict(data)
        except TypeError as err:  # e.g. a field of the wrong kind
            raise ConfigError(f"config {path}: {err}") from None

    def to_json_file(self, path: str | Path, format: Literal["hf", "google"] = "hf") -> None:
        from core import storage

        data = self.to_hf_dict() if format == "hf" else self.to_google_dict()
        storage.write_text(str(path), json.dumps(data, indent=2, sort_keys=True) + "\n")


# docs/albert.md §3. ALBERT presets are the v2 configs (no dropout); BERT equivalents keep BERT's 0.1
# dropout, use E = H and share nothing. Vocabulary 30000 (Google's SentencePiece); albert_zh tiny uses
# the 21128-entry Chinese BERT vocabulary.
def _albert(E: int, H: int, layers: int, heads: int, vocab: int = 30000) -> dict[str, Any]:
    """An ALBERT preset: embedding width E, hidden width H, FFN 4H, everything shared (one group)."""
    return dict(
        vocab_size=vocab,
        embedding_size=E,
        hidden_size=H,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=4 * H,
    )


def _bert(H: int, layers: int, heads: int) -> dict[str, Any]:
    """The BERT equivalent: E = H, one group per layer, nothing shared, dropout 0.1."""
    return dict(
        _albert(H, H, layers, heads),
        num_hidden_groups=layers,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        sharing="none",
    )


PRESETS: dict[str, dict[str, Any]] = {
    "tiny": _albert(128, 312, 4, 12, vocab=21128),
    "base": _albert(128, 768, 12, 12),
    "large": _albert(128, 1024, 24, 16),
    "xlarge": _albert(128, 2048, 24, 16),
    "xxlarge": _albert(128, 4096, 12, 64),
    "bert_base": _bert(768, 12, 12),
    "bert_large": _bert(1024, 24, 16),
}


def load_config(spec: str | Path) -> AlbertConfig:
    """A preset name ("tiny", "base", ...) or a path to a config JSON file (either format)."""
    text = str(spec)
    if text.replace("-", "_").lower() in PRESETS:
        return AlbertConfig.from_preset(text)
    from core import storage

    if storage.isfile(text):
        return AlbertConfig.from_json_file(text)
    raise ConfigError(f"{text!r} is neither a preset ({', '.join(PRESETS)}) nor a config file")

"""The project's checkpoint folder, and export to transformers.

A checkpoint folder holds:

    config.json         transformers format (model.config.AlbertConfig.to_hf_dict)
    model.safetensors   the state dict with transformers' key names, each tensor stored once
    spm.model           optional: the SentencePiece model the vocabulary stage trained

Tied or shared tensors (the MLM decoder = word embeddings, partially shared layers) are stored once,
under the first name `named_parameters` gives them; loading re-ties them, since the model object does.
Only safetensors are read: no pickle is ever unpickled.

`export_hf` writes a folder that `transformers.AlbertForPreTraining.from_pretrained` loads with no
missing or unexpected keys. transformers itself is not needed for that (nor imported here).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
import torch.nn as nn

from model.albert import (
    SHARED_SUBMODULES,
    AlbertForPreTraining,
    AlbertForSequenceClassification,
    AlbertForTokenClassification,
    AlbertModel,
    AlbertPreTrainedModel,
)
from model.config import AlbertConfig
from pipelines import storage
from pipelines.errors import UserError

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
SPM_NAME = "spm.model"


# ---------------------------------------------------------------------------------------------------
# State dicts


def tied_aliases(model: nn.Module) -> dict[str, str]:
    """{alias: canonical name} for every parameter reachable under more than one name."""
    first: dict[int, str] = {}
    aliases: dict[str, str] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) in first:
            aliases[name] = first[id(p)]
        else:
            first[id(p)] = name
    return aliases


def canonical_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """The state dict with each tied or shared tensor once (contiguous, detached, on CPU)."""
    aliases = tied_aliases(model)
    return {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items() if k not in aliases}


def to_hf_state_dict(model: AlbertForPreTraining) -> tuple[dict[str, torch.Tensor], AlbertConfig]:
    """State dict and config that transformers' AlbertForPreTraining loads as is.

    sharing "all" and "none" are already transformers layouts. For "attention" and "ffn" the shared
    sub-module is written once per layer group (copies), with num_hidden_groups = num_hidden_layers:
    transformers then holds them untied but equal, which computes the same function.
    """
    config = model.config
    state = canonical_state_dict(model)
    if config.sharing in ("attention", "ffn"):
        full = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
        aliases = tied_aliases(model)
        for alias, canonical in aliases.items():
            if alias.startswith("albert.encoder.albert_layer_groups."):
                state[alias] = full[canonical].clone()
        config = config.replace(sharing="none")
    # transformers stores predictions.decoder.{weight,bias} only through the tie: leave them out.
    return state, config


def _model_class(name: str) -> type[AlbertPreTrainedModel]:
    classes = {
        c.__name__: c
        for c in (
            AlbertForPreTraining,
            AlbertModel,
            AlbertForSequenceClassification,
            AlbertForTokenClassification,
        )
    }
    if name not in classes:
        raise UserError(f"unknown model class {name!r}; expected one of {', '.join(classes)}")
    return classes[name]


# ---------------------------------------------------------------------------------------------------
# Checkpoint folder


def save_pretrained(
    model: AlbertPreTrainedModel, out_dir: str | Path, spm_model_path: str | Path | None = None
) -> str:
    """Write config.json, model.safetensors and (optionally) spm.model into out_dir (a folder or URL).
    Each file appears whole (pipelines.storage.write_bytes)."""
    from safetensors.torch import save as st_save

    out = str(out_dir)
    state = canonical_state_dict(model)
    config = model.config.to_hf_dict()
    config["architectures"] = [type(model).__name__]
    if hasattr(model, "num_labels"):  # fine-tuning heads: their width, for load_pretrained
        config["num_labels"] = model.num_labels
    storage.write_bytes(storage.join(out, WEIGHTS_NAME), st_save(state, metadata={"format": "pt"}))
    storage.write_text(storage.join(out, CONFIG_NAME), json.dumps(config, indent=2, sort_keys=True) + "\n")
    if spm_model_path is not None:
        src = str(spm_model_path)
        if not storage.isfile(src):
            raise UserError(f"SentencePiece model not found: {src}")
        if storage.absolute(src) != storage.absolute(storage.join(out, SPM_NAME)):
            storage.copy(src, storage.join(out, SPM_NAME))
    return out


def read_checkpoint(ckpt_dir: str | Path) -> tuple[AlbertConfig, dict[str, torch.Tensor], dict]:
    """(config, tensors, raw config.json) of a checkpoint folder (a path or URL); UserError when it is
    not one."""
    from safetensors.torch import load as st_load

    d = str(ckpt_dir)
    if not storage.isdir(d):
        raise UserError(f"checkpoint folder not found: {d}")
    for name in (CONFIG_NAME, WEIGHTS_NAME):
        if not storage.isfile(storage.join(d, name)):
            raise UserError(f"{d} is not a checkpoint folder: {name} is missing")
    raw = storage.read_json(storage.join(d, CONFIG_NAME))
    return AlbertConfig.from_hf_dict(raw), st_load(storage.read_bytes(storage.join(d, WEIGHTS_NAME))), raw


def load_state(
    model: AlbertPreTrainedModel, state: dict[str, torch.Tensor], source: str = "checkpoint"
) -> None:
    """Load `state` into `model`, strictly up to ties and head changes.

    Allowed differences: tied aliases (stored once), the pretraining heads when loading into a
    fine-tuning model (unexpected `predictions.*` / `sop_classifier.*`, `albert.pooler.*` without a
    pooler) and a fine-tuning head that the checkpoint does not have yet (missing `classifier.*`,
    left at its init). Anything else is a UserError naming the keys.
    """
    aliases = tied_aliases(model)
    expected = {k for k in model.state_dict() if k not in aliases}
    if isinstance(model, AlbertModel):  # a bare backbone: checkpoints of head models prefix it with albert.
        state = {k.removeprefix("albert."): v for k, v in state.items() if k.startswith("albert.")} or state
    missing = sorted(expected - set(state))
    unexpected = sorted(set(state) - expected - set(aliases))
    head_model = not isinstance(model, AlbertForPreTraining)
    if head_model:
        missing = [k for k in missing if not k.startswith("classifier.")]
        droppable = ("predictions.", "sop_classifier.", "albert.pooler.", "pooler.")
        unexpected = [k for k in unexpected if not k.startswith(droppable)]
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"missing {', '.join(missing[:8])}{' ...' if len(missing) > 8 else ''}")
        if unexpected:
            parts.append(f"unexpected {', '.join(unexpected[:8])}{' ...' if len(unexpected) > 8 else ''}")
        raise UserError(f"{source} does not match the model: {'; '.join(parts)}")
    own = model.state_dict()
    for k, v in state.items():
        if k in own and own[k].shape != v.shape:
            raise UserError(
                f"{source}: {k} has shape {tuple(v.shape)}, the model expects {tuple(own[k].shape)}"
            )
    model.load_state_dict({k: v for k, v in state.items() if k in own}, strict=False)


def load_pretrained(
    ckpt_dir: str | Path,
    model_class: type[AlbertPreTrainedModel] | str | None = None,
    map_location: str | torch.device = "cpu",
    **model_kwargs,
) -> AlbertPreTrainedModel:
    """Build the model a checkpoint folder describes and load its weights.

    model_class: None = the class recorded in config.json (AlbertForPreTraining by default); a
    fine-tuning class (e.g. AlbertForSequenceClassification with num_labels=3) loads the pretrained
    backbone of a pretraining checkpoint and keeps its new head at init.
    """
    config, state, raw = read_checkpoint(ckpt_dir)
    if model_class is None:
        model_class = (raw.get("architectures") or ["AlbertForPreTraining"])[0]
    if isinstance(model_class, str):
        model_class = _model_class(model_class)
    recorded = (raw.get("architectures") or [None])[0]
    if "num_labels" in raw and "num_labels" not in model_kwargs and model_class.__name__ == recorded:
        model_kwargs["num_labels"] = raw["num_labels"]
    model = model_class(config, **model_kwargs)
    load_state(model, state, source=str(ckpt_dir))
    return model.to(map_location)


# ---------------------------------------------------------------------------------------------------
# transformers export


def _hf_tokenizer_files(spm_path: str, out: str) -> None:
    """spiece.model + tokenizer_config.json so transformers' AlbertTokenizer loads the vocabulary.

    The ids of [CLS]/[SEP]/[MASK]/pad/unk are those of the model. Caveat: pipelines.tokenizer also
    normalizes text and splits CJK characters before SentencePiece, which AlbertTokenizer does not,
    so transformers' tokenization of raw Chinese text can differ from the pretraining data's.
    (Recent transformers convert .model files through protobuf; with an incompatible protobuf pin
    they cannot read them at all: the files are still the right ones.)
    """
    import sentencepiece as spm

    proto = storage.read_bytes(spm_path)
    sp = spm.SentencePieceProcessor(model_proto=proto)

    def piece(i: int, default: str) -> str:
        return sp.id_to_piece(i) if 0 <= i < sp.get_piece_size() else default

    def find(p: str, default: str) -> str:
        return p if sp.piece_to_id(p) != sp.unk_id() else default

    storage.write_bytes(storage.join(out, "spiece.model"), proto)
    tokenizer_config = {
        "tokenizer_class": "AlbertTokenizer",
        "do_lower_case": False,
        "keep_accents": True,
        "remove_space": True,
        "unk_token": piece(sp.unk_id(), "<unk>"),
        "pad_token": piece(sp.pad_id(), "<pad>"),
        "cls_token": find("[CLS]", "[CLS]"),
        "sep_token": find("[SEP]", "[SEP]"),
        "mask_token": find("[MASK]", "[MASK]"),
        "bos_token": find("[CLS]", "[CLS]"),
        "eos_token": find("[SEP]", "[SEP]"),
        "model_max_length": 512,
    }
    storage.write_text(
        storage.join(out, "tokenizer_config.json"), json.dumps(tokenizer_config, indent=2) + "\n"
    )


def export_hf(ckpt_dir: str | Path, out_dir: str | Path) -> str:
    """Checkpoint folder -> a transformers AlbertForPreTraining folder (+ tokenizer files if spm.model).
    Either may be a local path or a URL."""
    from safetensors.torch import save as st_save

    model = load_pretrained(ckpt_dir, AlbertForPreTraining)
    state, config = to_hf_state_dict(model)
    out = str(out_dir)
    hf_config = config.to_hf_dict()
    hf_config.pop("sharing", None)
    storage.write_bytes(storage.join(out, WEIGHTS_NAME), st_save(state, metadata={"format": "pt"}))
    storage.write_text(storage.join(out, CONFIG_NAME), json.dumps(hf_config, indent=2, sort_keys=True) + "\n")
    spm_path = storage.join(str(ckpt_dir), SPM_NAME)
    if storage.isfile(spm_path):
        storage.copy(spm_path, storage.join(out, SPM_NAME))
        _hf_tokenizer_files(spm_path, out)
    return out


__all__ = [
    "CONFIG_NAME",
    "SHARED_SUBMODULES",
    "SPM_NAME",
    "WEIGHTS_NAME",
    "canonical_state_dict",
    "export_hf",
    "load_pretrained",
    "load_state",
    "read_checkpoint",
    "save_pretrained",
    "tied_aliases",
    "to_hf_state_dict",
]

"""The project's checkpoint folder, and export to transformers.

A checkpoint folder holds:

    config.json         transformers format (model.config.AlbertConfig.to_hf_dict)
    model.safetensors   the state dict with transformers' key names, each tensor stored once
    spm.model           optional: the SentencePiece model the vocabulary stage trained
    checksums.json      {"files": {name: sha256}} of the files above, written LAST

Every folder this project writes has checksums.json (model/checksums.py), and every load verifies the
files it reads against it: one flipped bit is an error naming the file, never a silently different
model. A foreign folder (a transformers download) has none: its config.json and safetensors are parsed
strictly instead (a truncated or damaged file fails to parse; non-finite weights are refused).

Tied or shared tensors (the MLM decoder = word embeddings, partially shared layers) are stored once,
under the first name `named_parameters` gives them; loading re-ties them, since the model object does.
Only safetensors are read: no pickle is ever unpickled.

`export_hf` writes a folder that transformers loads with no missing or unexpected keys: as
`AlbertForPreTraining` for a pretraining checkpoint, as `AlbertForSequenceClassification` or
`AlbertForTokenClassification` (with num_labels, id2label and label2id) for a fine-tuned one
(EXPORTED_CLASSES). transformers itself is not needed for that (nor imported here).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import partial
from pathlib import Path

import torch
import torch.nn as nn

from core import storage
from core.errors import UserError
from core.outdir import check_apart, claim, scope
from model.albert import SHARED_SUBMODULES, AlbertForPreTraining, AlbertModel, AlbertPreTrainedModel
from model.checksums import (
    CHECKSUMS_NAME,
    TRAINER_NAME,
    CheckpointError,
    checksums_json,
    digest,
    read_checksums,
    read_tensors,
    read_verified,
    verify_file,
    write_files,
)
from model.classifiers import AlbertForSequenceClassification, AlbertForTokenClassification
from model.config import AlbertConfig

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
SPM_NAME = "spm.model"

# The sizes a checkpoint's config.json must state (ours and transformers' always do): with one missing,
# AlbertConfig's default would describe another model than the weights.
REQUIRED_CONFIG_FIELDS = (
    "vocab_size",
    "embedding_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
)


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


def to_hf_state_dict(model: AlbertPreTrainedModel) -> tuple[dict[str, torch.Tensor], AlbertConfig]:
    """State dict and config that transformers' class of the same name (AlbertForPreTraining, or a
    fine-tuning head) loads as is.

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


# What `albert export --format hf` writes: the class config.json records (AlbertForPreTraining when none).
EXPORTED_CLASSES = (AlbertForPreTraining, AlbertForSequenceClassification, AlbertForTokenClassification)


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


def _spm_bytes(spm_model_path: str | Path) -> bytes:
    src = str(spm_model_path)
    if not storage.isfile(src):
        raise UserError(f"SentencePiece model not found: {src}")
    return storage.read_bytes(src)


def head_config(model: AlbertPreTrainedModel, labels: Sequence[str] | None = None) -> dict:
    """config.json's keys for the model's class: "architectures", and for a fine-tuning head its
    "num_labels" and, given the label names (label id i = labels[i]), "id2label" and "label2id" as
    transformers writes them (JSON keys are strings)."""
    out: dict = {"architectures": [type(model).__name__]}
    if not hasattr(model, "num_labels"):
        if labels is not None:
            raise ValueError(f"labels go with a fine-tuning head, not a {type(model).__name__}")
        return out
    out["num_labels"] = model.num_labels
    if labels is not None:
        labels = [str(label) for label in labels]
        if len(labels) != model.num_labels or len(set(labels)) != len(labels):
            raise ValueError(f"expected {model.num_labels} distinct label names, got {labels}")
        out["id2label"] = {str(i): label for i, label in enumerate(labels)}
        out["label2id"] = {label: i for i, label in enumerate(labels)}
    return out


def save_pretrained(
    model: AlbertPreTrainedModel,
    out_dir: str | Path,
    spm_model_path: str | Path | None = None,
    labels: Sequence[str] | None = None,
) -> str:
    """Write config.json, model.safetensors, (optionally) spm.model and checksums.json into out_dir (a
    folder or URL). Each file appears whole (model.checksums.write_files), checksums.json last; the
    weights go straight to their file (safetensors save_file), never through one bytes object.
    A fine-tuned classifier (model.classifiers) records its class, num_labels and, given `labels`
    (the name of each label id, e.g. model.ner_data.BIO_TAGS), id2label and label2id: `albert export
    --format hf` of the folder then writes a transformers classifier with the same labels."""
    from safetensors.torch import save_file

    out = str(out_dir)
    spm = _spm_bytes(spm_model_path) if spm_model_path is not None else None  # before writing anything
    config = {**model.config.to_hf_dict(), **head_config(model, labels)}
    files = {
        WEIGHTS_NAME: partial(save_file, canonical_state_dict(model), metadata={"format": "pt"}),
        CONFIG_NAME: (json.dumps(config, indent=2, sort_keys=True) + "\n").encode(),
    }
    if spm is not None:
        files[SPM_NAME] = spm
    write_files(out, files)
    return out


def _parse_config(folder: str, data: bytes) -> tuple[AlbertConfig, dict]:
    path = storage.join(folder, CONFIG_NAME)
    try:
        raw = json.loads(data.decode("utf-8"))
    except ValueError as err:  # not JSON, not UTF-8
        raise CheckpointError(f"{path} is not valid JSON ({err})") from None
    if not isinstance(raw, dict):
        raise CheckpointError(f"{path} is not a JSON object")
    missing = [k for k in REQUIRED_CONFIG_FIELDS if k not in raw]
    if missing:
        raise CheckpointError(
            f"{path} lacks {', '.join(missing)} (a checkpoint's config.json states its sizes)"
        )
    architectures = raw.get("architectures", [])
    if not isinstance(architectures, list) or not all(isinstance(a, str) for a in architectures):
        raise CheckpointError(f"{path}: architectures must be a list of class names, got {architectures!r}")
    labels = raw.get("num_labels", 1)
    if not isinstance(labels, int) or isinstance(labels, bool) or labels < 1:
        raise CheckpointError(f"{path}: num_labels must be a positive integer, got {labels!r}")
    names = raw.get("id2label")
    if names is not None and (
        not isinstance(names, dict) or sorted(names) != sorted(str(i) for i in range(len(names)))
    ):
        raise CheckpointError(f"{path}: id2label must map the label ids 0..n-1 to names, got {names!r}")
    try:
        return AlbertConfig.from_hf_dict(raw), raw
    except (ValueError, TypeError) as err:  # ConfigError (a ValueError), a field of the wrong kind
        raise CheckpointError(f"{path}: {err}") from None


def _parse_weights(folder: str, sums: dict[str, str] | None) -> dict[str, torch.Tensor]:
    """The weights, verified and loaded from disk (model.checksums.read_tensors: safetensors' own parse
    is strict: header, offsets, the file covered exactly); non-finite weights are never written
    (model.checkpoint.save refuses them), so they mean a damaged file."""
    path = storage.join(folder, WEIGHTS_NAME)
    state = read_tensors(folder, WEIGHTS_NAME, sums)
    bad = [k for k, v in state.items() if v.is_floating_point() and not torch.isfinite(v).all()]
    if bad:
        raise CheckpointError(
            f"{path} holds non-finite weights ({', '.join(bad[:3])}): a damaged file; use another checkpoint"
        )
    return state


def read_checkpoint(ckpt_dir: str | Path) -> tuple[AlbertConfig, dict[str, torch.Tensor], dict]:
    """(config, tensors, raw config.json) of a checkpoint folder (a path or URL), its files verified
    against checksums.json (or parsed strictly in a foreign folder); UserError when it is not one."""
    folder = str(ckpt_dir)
    if not storage.isdir(folder):
        raise UserError(f"checkpoint folder not found: {folder}")
    for name in (CONFIG_NAME, WEIGHTS_NAME):
        if not storage.isfile(storage.join(folder, name)):
            raise CheckpointError(f"{folder} is not a checkpoint folder: {name} is missing")
    sums = read_checksums(folder)
    config, raw = _parse_config(folder, read_verified(folder, CONFIG_NAME, sums))
    state = _parse_weights(folder, sums)
    if sums is not None and SPM_NAME in sums:  # evaluate, finetune and export read it next
        verify_file(folder, SPM_NAME, sums)
    return config, state, raw


def load_state(
    model: AlbertPreTrainedModel, state: dict[str, torch.Tensor], source: str = "checkpoint"
) -> None:
    """Load `state` into `model`, strictly up to ties and head changes.

    Allowed differences: tied aliases (stored once), the pretraining heads when loading into a
    fine-tuning model (unexpected `predictions.*` / `sop_classifier.*`, `albert.pooler.*` without a
    pooler) and a fine-tuning head that the checkpoint does not have yet (missing `classifier.*`, or
    whatever the model's `head_parameters` name, e.g. a CRF layer's transitions: left at their init).
    Anything else is a UserError naming the keys.
    """
    aliases = tied_aliases(model)
    expected = {k for k in model.state_dict() if k not in aliases}
    if isinstance(model, AlbertModel):  # a bare backbone: checkpoints of head models prefix it with albert.
        state = {k.removeprefix("albert."): v for k, v in state.items() if k.startswith("albert.")} or state
    missing = sorted(expected - set(state))
    unexpected = sorted(set(state) - expected - set(aliases))
    head_model = not isinstance(model, AlbertForPreTraining)
    if head_model:
        head = getattr(model, "head_parameters", ("classifier.",))  # a fine-tuning head's own
        missing = [k for k in missing if not k.startswith(head)]
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
    return build_model(config, state, raw, model_class, str(ckpt_dir), **model_kwargs).to(map_location)


def build_model(
    config: AlbertConfig,
    state: dict[str, torch.Tensor],
    raw: dict,
    model_class: type[AlbertPreTrainedModel] | str | None = None,
    source: str = "checkpoint",
    **model_kwargs,
) -> AlbertPreTrainedModel:
    """load_pretrained's model from what read_checkpoint returned (on CPU)."""
    if model_class is None:
        model_class = (raw.get("architectures") or ["AlbertForPreTraining"])[0]
    if isinstance(model_class, str):
        model_class = _model_class(model_class)
    recorded = (raw.get("architectures") or [None])[0]
    if "num_labels" in raw and "num_labels" not in model_kwargs and model_class.__name__ == recorded:
        model_kwargs["num_labels"] = raw["num_labels"]
    model = model_class(config, **model_kwargs)
    load_state(model, state, source=source)
    return model


def exported_model(ckpt_dir: str) -> tuple[AlbertPreTrainedModel, dict]:
    """(model, its config.json keys of head_config) of a checkpoint to export: the class it records
    when that is one of EXPORTED_CLASSES (a UserError for another), AlbertForPreTraining when none."""
    config, state, raw = read_checkpoint(ckpt_dir)
    recorded = (raw.get("architectures") or ["AlbertForPreTraining"])[0]
    if recorded not in {c.__name__ for c in EXPORTED_CLASSES}:
        names = ", ".join(c.__name__ for c in EXPORTED_CLASSES)
        raise UserError(f"{ckpt_dir} holds an {recorded}: export takes a checkpoint of {names}")
    model = build_model(config, state, raw, recorded, ckpt_dir)
    head = {
        k: raw[k] for k in ("num_labels", "id2label", "label2id") if k in raw and hasattr(model, "num_labels")
    }
    return model, {"architectures": [recorded], **head}


# ---------------------------------------------------------------------------------------------------
# transformers export


def parse_spm(path: str, proto: bytes):
    """A SentencePieceProcessor of `proto` (the bytes of `path`); CheckpointError naming the file when
    it is not a SentencePiece model (sentencepiece raises a bare RuntimeError, or loads 0 pieces)."""
    import sentencepiece as spm

    try:
        sp = spm.SentencePieceProcessor(model_proto=proto)
    except RuntimeError:
        sp = None
    if sp is None or sp.get_piece_size() == 0:
        raise CheckpointError(f"{path} is not a SentencePiece model (damaged or another kind of file)")
    return sp


@scope()  # the lock of --out (claim) is held until the export ends
def export_hf(
    ckpt_dir: str | Path, out_dir: str | Path, force: bool = False, eval_reports: list[str] | None = None
) -> str:
    """Checkpoint folder -> a transformers folder: the weights and config of its class (EXPORTED_CLASSES:
    AlbertForPreTraining, or a fine-tuned classifier with its labels), the tokenizer files (model.hf_tokenizer) when the checkpoint has spm.model, a model card (README.md,
    model.model_card, with the metrics of `eval_reports`) and checksums.json. Either folder may be a
    local path or a URL. Everything is read, verified and converted before `out_dir` is claimed
    (core.outdir: new, empty, an earlier export, or --force) and written, so a bad checkpoint or
    report leaves no output behind. Files get the umask's mode (group-readable under the usual 022)."""
    from safetensors.torch import save_file

    from model.hf_tokenizer import identity_vocabulary, tokenizer_files
    from model.model_card import model_card

    reports = {}
    for path in eval_reports or []:
        if not storage.isfile(path):
            raise UserError(f"--eval {path}: no such file")
        try:
            report = storage.read_json(path)
        except ValueError:
            report = None
        if not isinstance(report, dict) or not (
            {"masked_lm", "sentence_order"} <= set(report) or {"models", "lift"} <= set(report)
        ):
            raise UserError(
                f"--eval {path} is not an `albert evaluate --out` or `albert finetune --out` report"
            )
        reports[storage.basename(path)] = report

    ckpt, out = str(ckpt_dir), str(out_dir)
    # Before any work, links resolved: --out never leads into the checkpoint or a report (also at claim).
    read = [("the checkpoint folder", ckpt), *(("the input --eval", path) for path in eval_reports or [])]
    check_apart(out, read)
    model, head = exported_model(ckpt)
    state, config = to_hf_state_dict(model)
    hf_config = {**config.to_hf_dict(), **head}
    hf_config.pop("sharing", None)
    files = {
        WEIGHTS_NAME: partial(save_file, state, metadata={"format": "pt"}),
        CONFIG_NAME: (json.dumps(hf_config, indent=2, sort_keys=True) + "\n").encode(),
    }
    spm_path = storage.join(ckpt, SPM_NAME)
    identity = False
    if storage.isfile(spm_path):  # load_pretrained verified it against checksums.json
        proto = storage.read_bytes(spm_path)
        files[SPM_NAME] = proto
        files.update(tokenizer_files(parse_spm(spm_path, proto), proto, hf_config["max_position_embeddings"]))
        identity = identity_vocabulary(proto)
    files["README.md"] = model_card(ckpt, hf_config, reports, identity, out).encode()
    claim(out, "export", force=force, inputs=read)  # new, empty, an earlier export, or --force
    write_files(out, files)
    return out


# model/checksums.py's names are part of this module's interface (model.checkpoint imports them here).
__all__ = [
    "CHECKSUMS_NAME",
    "CONFIG_NAME",
    "CheckpointError",
    "SHARED_SUBMODULES",
    "SPM_NAME",
    "TRAINER_NAME",
    "WEIGHTS_NAME",
    "canonical_state_dict",
    "checksums_json",
    "digest",
    "EXPORTED_CLASSES",
    "build_model",
    "export_hf",
    "exported_model",
    "head_config",
    "load_pretrained",
    "load_state",
    "parse_spm",
    "read_checkpoint",
    "read_checksums",
    "read_verified",
    "save_pretrained",
    "tied_aliases",
    "to_hf_state_dict",
    "verify_file",
    "write_files",
]

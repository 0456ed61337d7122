"""Original TF checkpoints (google-research/albert, Google-layout albert_zh) <-> checkpoint folders.

Variable names (docs/albert.md §3), for group g and inner layer k:

    bert/embeddings/{word,position,token_type}_embeddings        albert.embeddings.*.weight
    bert/embeddings/LayerNorm/{gamma,beta}                       albert.embeddings.LayerNorm.{weight,bias}
    bert/encoder/embedding_hidden_mapping_in/{kernel,bias}       albert.encoder.embedding_hidden_mapping_in
    bert/encoder/transformer/group_g/inner_group_k/
        attention_1/self/{query,key,value}/{kernel,bias}         ...albert_layers.k.attention.{query,key,value}
        attention_1/output/dense/{kernel,bias}                   ...attention.dense
        LayerNorm/{gamma,beta}                                   ...attention.LayerNorm
        ffn_1/intermediate/dense/{kernel,bias}                   ...ffn
        ffn_1/intermediate/output/dense/{kernel,bias}            ...ffn_output
        LayerNorm_1/{gamma,beta}                                 ...full_layer_layer_norm
    bert/pooler/dense/{kernel,bias}                              albert.pooler
    cls/predictions/transform/dense, .../LayerNorm               predictions.dense, predictions.LayerNorm
    cls/predictions/output_bias                                  predictions.bias
    cls/seq_relationship/output_weights ([2, H]), output_bias    sop_classifier.classifier

TF kernels are [in, out] (transposed for torch's [out, in]); output_weights is already [out, in].
Optimizer slots and counters are skipped; any other unknown, missing or mis-shaped variable is an
error naming it. TensorFlow is imported only when one of these functions runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path

import numpy as np
import torch

from core import storage
from core.errors import UserError
from core.outdir import check_apart, claim, scope
from model.albert import AlbertForPreTraining
from model.checksums import CHECKSUMS_NAME, checksums_json, read_checksums, verify_file
from model.config import AlbertConfig
from model.convert import (
    SPM_NAME,
    exported_model,
    load_state,
    parse_spm,
    save_pretrained,
    to_hf_state_dict,
)

# Not weights: optimizer slots (google's LAMB/AdamW write adam_m / adam_v; tf.train.AdamOptimizer
# writes Adam / Adam_1), step counters, loss-scale state, TF2's object graph.
IGNORED_SUFFIXES = ("/adam_m", "/adam_v", "/Adam", "/Adam_1", "/Momentum")
IGNORED_NAMES = frozenset(
    {
        "global_step",
        "_CHECKPOINTABLE_OBJECT_GRAPH",
        "beta1_power",
        "beta2_power",
        "good_steps",
        "current_loss_scale",
        "loss_scale",
    }
)

TF_CHECKPOINT_NAME = "model.ckpt"
GOOGLE_CONFIG_NAME = "albert_config.json"


def _tf():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep TF's C++ start-up chatter out of the CLI
    try:
        import tensorflow as tf
    except ImportError:
        raise UserError("TF checkpoint conversion needs TensorFlow: pip install tensorflow-cpu") from None
    return tf


def is_ignored(tf_name: str) -> bool:
    return tf_name in IGNORED_NAMES or tf_name.endswith(IGNORED_SUFFIXES)


def tf_name_map(config: AlbertConfig) -> list[tuple[str, str, bool]]:
    """(TF variable name, torch state-dict key, transpose) for every weight of AlbertForPreTraining."""
    rows: list[tuple[str, str, bool]] = []

    def dense(tf_scope: str, torch_prefix: str) -> None:
        rows.append((f"{tf_scope}/kernel", f"{torch_prefix}.weight", True))
        rows.append((f"{tf_scope}/bias", f"{torch_prefix}.bias", False))

    def layer_norm(tf_scope: str, torch_prefix: str) -> None:
        rows.append((f"{tf_scope}/gamma", f"{torch_prefix}.weight", False))
        rows.append((f"{tf_scope}/beta", f"{torch_prefix}.bias", False))

    for kind in ("word", "position", "token_type"):
        rows.append(
            (f"bert/embeddings/{kind}_embeddings", f"albert.embeddings.{kind}_embeddings.weight", False)
        )
    layer_norm("bert/embeddings/LayerNorm", "albert.embeddings.LayerNorm")
    dense("bert/encoder/embedding_hidden_mapping_in", "albert.encoder.embedding_hidden_mapping_in")
    for g in range(config.num_hidden_groups):
        for k in range(config.inner_group_num):
            tf_layer = f"bert/encoder/transformer/group_{g}/inner_group_{k}"
            pt_layer = f"albert.encoder.albert_layer_groups.{g}.albert_layers.{k}"
            for proj in ("query", "key", "value"):
                dense(f"{tf_layer}/attention_1/self/{proj}", f"{pt_layer}.attention.{proj}")
            dense(f"{tf_layer}/attention_1/output/dense", f"{pt_layer}.attention.dense")
            layer_norm(f"{tf_layer}/LayerNorm", f"{pt_layer}.attention.LayerNorm")
            dense(f"{tf_layer}/ffn_1/intermediate/dense", f"{pt_layer}.ffn")
            dense(f"{tf_layer}/ffn_1/intermediate/output/dense", f"{pt_layer}.ffn_output")
            layer_norm(f"{tf_layer}/LayerNorm_1", f"{pt_layer}.full_layer_layer_norm")
    dense("bert/pooler/dense", "albert.pooler")
    dense("cls/predictions/transform/dense", "predictions.dense")
    layer_norm("cls/predictions/transform/LayerNorm", "predictions.LayerNorm")
    rows.append(("cls/predictions/output_bias", "predictions.bias", False))
    rows.append(("cls/seq_relationship/output_weights", "sop_classifier.classifier.weight", False))
    rows.append(("cls/seq_relationship/output_bias", "sop_classifier.classifier.bias", False))
    return rows


def resolve_prefix(path: str | Path) -> str:
    """A checkpoint prefix from a prefix (model.ckpt-125000) or a folder holding one checkpoint."""
    prefix = Path(path)
    if Path(f"{prefix}.index").is_file():
        return str(prefix)
    if prefix.is_dir():
        latest = _tf().train.latest_checkpoint(str(prefix))
        if latest:
            return latest
        indexes = sorted(prefix.glob("*.index"))
        if len(indexes) == 1:
            return str(indexes[0].with_suffix(""))
        if len(indexes) > 1:
            raise UserError(
                f"{prefix} holds several checkpoints; pass one prefix, e.g. {indexes[-1].with_suffix('')}"
            )
    raise UserError(f"no TF checkpoint at {prefix} (expected a prefix with a .index file, or a folder)")


def read_tf_weights(prefix: str, config: AlbertConfig) -> dict[str, torch.Tensor]:
    """The AlbertForPreTraining state dict (canonical keys) stored in a TF checkpoint."""
    tf = _tf()
    try:
        reader = tf.train.load_checkpoint(prefix)
    except Exception as err:  # tf raises NotFoundError / DataLossError with long messages
        raise UserError(f"cannot read TF checkpoint {prefix}: {str(err).splitlines()[0]}") from None
    shapes = reader.get_variable_to_shape_map()
    table = tf_name_map(config)
    known = {tf_name for tf_name, _, _ in table}
    unmapped = sorted(n for n in shapes if n not in known and not is_ignored(n))
    if unmapped:
        raise UserError(
            f"TF checkpoint {prefix} has variable(s) with no ALBERT counterpart for this config: "
            f"{', '.join(unmapped[:6])}{' ...' if len(unmapped) > 6 else ''} "
            f"(a non-Google albert_zh layout, or num_hidden_groups/inner_group_num not matching the config?)"
        )
    missing = [n for n in known if n not in shapes]
    if missing:
        raise UserError(f"TF checkpoint {prefix} lacks variable(s): {', '.join(missing[:6])}")
    expected = {k: tuple(shape) for k, shape in expected_shapes(config).items()}
    state: dict[str, torch.Tensor] = {}
    for tf_name, key, transpose in table:
        try:
            array = np.asarray(reader.get_tensor(tf_name), dtype=np.float32)
        except Exception as err:  # a truncated, missing or corrupt data file: DataLossError, IndexError...
            raise UserError(
                f"cannot read {tf_name} from TF checkpoint {prefix}: {str(err).splitlines()[0]} "
                f"(a damaged or incomplete copy: copy it again)"
            ) from None
        if transpose:
            array = array.T
        if tuple(array.shape) != expected[key]:
            raise UserError(
                f"TF variable {tf_name} has shape {list(shapes[tf_name])}; the config needs "
                f"{list(expected[key][::-1] if transpose else expected[key])}"
            )
        state[key] = torch.from_numpy(np.ascontiguousarray(array))
    return state


def expected_shapes(config: AlbertConfig) -> dict[str, torch.Size]:
    """State-dict shapes without allocating the model (built on the meta device)."""
    with torch.device("meta"):
        model = AlbertForPreTraining(config)
    return {k: v.shape for k, v in model.state_dict().items()}


@scope()  # the lock of --out (claim) is held until the import ends
def import_tf_checkpoint(
    tf_checkpoint: str | Path,
    config_path: str | Path,
    out_dir: str | Path,
    spm_model_path: str | Path | None = None,
    force: bool = False,
) -> str:
    """TF checkpoint + albert_config.json -> checkpoint folder (with checksums.json). Returns the
    folder. Every path may be a URL: a remote TF checkpoint is downloaded to a temporary folder first
    (TensorFlow's reader opens local files). Everything is read and checked before `out_dir` is
    claimed (core.outdir: new, empty, an earlier import, or --force) and written."""
    source, out = str(tf_checkpoint), str(out_dir)
    folder = source if storage.isdir(source) else storage.dirname(source)
    read = [
        ("the TF checkpoint", source),
        ("the input --config", str(config_path)),
        ("the input --spm-model", spm_model_path and str(spm_model_path)),
    ]
    check_apart(out, read)  # links resolved, before any work (and again at claim)
    config = AlbertConfig.from_json_file(str(config_path))
    if config.sharing not in ("all", "none"):
        raise UserError("TF checkpoints hold whole layer groups; use sharing 'all' or 'none'")
    if spm_model_path is not None:
        _check_spm(str(spm_model_path), config, str(config_path))
    _verify_export(folder)
    with _local_tf_checkpoint(source) as local:
        prefix = resolve_prefix(local)
        state = read_tf_weights(prefix, config)
    model = AlbertForPreTraining(config)
    load_state(model, state, source=f"TF checkpoint {tf_checkpoint}")
    claim(out, "import", force=force, inputs=read)  # new, empty, an earlier import, or --force
    return save_pretrained(model, out, spm_model_path)


def _check_spm(path: str, config: AlbertConfig, config_path: str) -> None:
    """--spm-model must be a SentencePiece model with exactly vocab_size pieces: another vocabulary
    would tokenize every text into the wrong ids."""
    if not storage.isfile(path):
        raise UserError(f"SentencePiece model not found: {path}")
    pieces = parse_spm(path, storage.read_bytes(path)).get_piece_size()
    if pieces != config.vocab_size:
        raise UserError(
            f"{path} has {pieces} pieces but {config_path} says vocab_size {config.vocab_size}: "
            f"not the vocabulary of this checkpoint"
        )


def _verify_export(folder: str) -> None:
    """A TF folder that `albert export --format tf` wrote carries checksums.json: verify every file."""
    sums = read_checksums(folder)
    for name in sums or {}:
        verify_file(folder, name, sums)


@contextlib.contextmanager
def _local_tf_checkpoint(path: str):
    """The path itself when local; else its files (a prefix's .index/.data-*, or a folder) in a
    temporary folder, yielded as the same prefix or folder there."""
    if not storage.is_url(path):
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="albert-tf-") as tmp:
        if storage.isdir(path):
            storage.get_dir(path, tmp)
            yield tmp
            return
        files = storage.glob(path + ".*")
        if not files:
            raise UserError(f"no TF checkpoint at {path} (expected {path}.index and data files)")
        for f in files:
            storage.copy(f, os.path.join(tmp, storage.basename(f)))
        yield os.path.join(tmp, storage.basename(path))


def write_tf_checkpoint(state: dict[str, torch.Tensor], config: AlbertConfig, prefix: str | Path) -> str:
    """Write `state` (canonical keys of a whole-group layout) under the original TF variable names."""
    tf = _tf()
    names, tensors = [], []
    for tf_name, key, transpose in tf_name_map(config):
        array = state[key].detach().float().cpu().numpy()
        names.append(tf_name)
        tensors.append(tf.constant(np.ascontiguousarray(array.T if transpose else array)))
    # SaveV2 writes a plain TF1-style bundle keyed by exactly these names (tf.train.Checkpoint would
    # key them by object path instead, which the original code cannot restore).
    tf.raw_ops.SaveV2(
        prefix=str(prefix), tensor_names=names, shape_and_slices=[""] * len(names), tensors=tensors
    )
    return str(prefix)


@scope()  # the lock of --out (claim) is held until the export ends
def export_tf(ckpt_dir: str | Path, out_dir: str | Path, force: bool = False) -> str:
    """Checkpoint folder -> model.ckpt.{index,data-*}, checkpoint, albert_config.json (+ spm.model) and
    checksums.json (last). out_dir may be a URL: the files are written locally and uploaded. The
    checkpoint is read, verified and converted before `out_dir` is claimed and written."""
    ckpt, out = str(ckpt_dir), str(out_dir)
    read = [("the checkpoint folder", ckpt)]
    check_apart(out, read)  # links resolved, before any work (and again at claim)
    model, _ = exported_model(ckpt)
    if not isinstance(model, AlbertForPreTraining):  # the original layout holds the pretraining heads only
        raise UserError(
            f"--format tf takes a pretraining checkpoint; {ckpt} holds an {type(model).__name__} (use --format hf)"
        )
    state, config = to_hf_state_dict(model)  # partial sharing written per group: a valid TF layout
    google_config = config.to_google_dict()
    spm_path = storage.join(ckpt, SPM_NAME)
    spm = storage.read_bytes(spm_path) if storage.isfile(spm_path) else None
    _tf()  # TensorFlow missing: say so before claiming anything
    claim(out, "export", force=force, inputs=read)
    storage.remove(storage.join(out, CHECKSUMS_NAME))  # an earlier export's: this one is not complete yet
    with storage.local_folder_for(out) as local:
        write_tf_checkpoint(state, config, os.path.join(local, TF_CHECKPOINT_NAME))
        texts = {
            "checkpoint": f'model_checkpoint_path: "{TF_CHECKPOINT_NAME}"\n'
            f'all_model_checkpoint_paths: "{TF_CHECKPOINT_NAME}"\n',
            GOOGLE_CONFIG_NAME: json.dumps(google_config, indent=2, sort_keys=True) + "\n",
        }
        for name, text in texts.items():
            storage.write_text(os.path.join(local, name), text)
        if spm is not None:
            storage.write_bytes(os.path.join(local, SPM_NAME), spm)
        names = [n for n in storage.listdir(local) if n.startswith(TF_CHECKPOINT_NAME + ".")]
        names += [*texts, *([SPM_NAME] if spm is not None else [])]
        sums = {name: storage.sha256(os.path.join(local, name)) for name in names}
    storage.write_bytes(storage.join(out, CHECKSUMS_NAME), checksums_json(sums))  # after the upload
    return out

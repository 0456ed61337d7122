"""A pretraining run's setup, done before any work (docs/trust-training.md): the inputs resolved and
checked (the instances: a finished folder, or foreign TFRecords with --vocab; the vocabulary: the one
they were built with, sha256 in their manifest; the token ids of the first records against it), the
model config built, the micro-batch planned, the MLM output bias initialised, the run folder claimed
(core.outdir: ours, new, or --force); and on resume, the checkpoint checked against all of them (the
same data by content, vocabulary, settings and world size).
"""

from __future__ import annotations

import dataclasses
import difflib
import itertools
import json

import numpy as np
import torch

from core import storage
from core.errors import UserError
from model.config import AlbertConfig
from model.train_config import TrainConfig


def build_model_config(cfg: TrainConfig, vocab_size: int | None, vocab: str | None = None) -> AlbertConfig:
    """The preset or config file, with --set overrides; vocab_size is the vocabulary's size."""
    name, overrides = cfg.model.model, cfg.model.model_overrides
    if name.endswith(".json"):
        check_config_fields(name)
        try:
            config = AlbertConfig.from_json_file(name)
        except UserError as err:  # not JSON, a value out of range: name the file when it does not
            raise UserError(str(err) if name in str(err) else f"--config {name}: {err}") from None
    else:
        config = AlbertConfig.from_preset(name)
    changes = dict(overrides)
    known = {f.name for f in dataclasses.fields(AlbertConfig)}
    unknown = sorted(set(changes) - known)
    if unknown:
        raise UserError(f"--set {unknown[0]}: not a model config field (known: {', '.join(sorted(known))})")
    if vocab_size is not None:
        if changes.get("vocab_size", vocab_size) != vocab_size:
            raise UserError(
                f"--set vocab_size={changes['vocab_size']}: the model's vocab_size is the size of the "
                f"vocabulary {vocab} ({vocab_size}); drop --set vocab_size"
            )
        changes["vocab_size"] = vocab_size
    try:
        return config.replace(**changes) if changes else config
    except (TypeError, ValueError) as err:  # a value of the wrong kind, e.g. --set hidden_size=big
        raise UserError(f"--set {', '.join(f'{k}={v!r}' for k, v in overrides.items())}: {err}") from None


# Keys of real config files that are not AlbertConfig fields: the original albert_config.json's fixed
# options and albert_zh's BERT leftovers (Google format); transformers' generic keys (its format).
_GOOGLE_KEYS = {
    "ln_type", "layers_to_keep", "net_structure_type", "gap_size", "num_memory_blocks", "down_scale_factor",
    "directionality", "pooler_fc_size", "pooler_num_attention_heads", "pooler_num_fc_layers",
    "pooler_size_per_head", "pooler_type",
}  # fmt: skip
_HF_KEYS = {
    "bos_token_id", "eos_token_id", "sep_token_id", "tie_word_embeddings", "position_embedding_type",
    "classifier_dropout",
}  # fmt: skip


def check_config_fields(path: str) -> None:
    """Refuse a misspelt field in a --config file (AlbertConfig's readers ignore keys they do not know,
    so "hidden_sizze": 64 would silently train the default size). albert_config.json (no model_type)
    has a fixed set of keys: any other is refused. transformers' config.json carries many keys of its
    own: there a key close to one of our fields is taken for a typo."""
    try:
        data = storage.read_json(path)
    except (OSError, ValueError):
        return  # missing or not JSON: AlbertConfig.from_json_file says so
    if not isinstance(data, dict):
        return
    fields = sorted(f.name for f in dataclasses.fields(AlbertConfig) if f.name != "extra")
    google = "model_type" not in data and "architectures" not in data
    for key in data:
        if key in fields or key in _GOOGLE_KEYS or (not google and key in _HF_KEYS):
            continue
        near = difflib.get_close_matches(key, fields, n=1, cutoff=0.8)
        if google or near:
            hint = f"did you mean {near[0]!r}?" if near else f"known: {', '.join(fields)}"
            raise UserError(f"--config {path}: unknown field {key!r} ({hint})")


def run_vocabulary(cfg: TrainConfig, data) -> str | None:
    """The run's spm.model: --vocab, else the one the instances' manifest.json names; checked against
    the sha256 the manifest recorded when the instances were built. Foreign TFRecords (no manifest)
    need --vocab: nothing else says which vocabulary made their ids. None only for our instances
    without a recorded vocabulary (synthetic benchmark data): the config's vocab_size stands."""
    from model.data import check_vocab

    vocab = cfg.data.vocab
    if vocab is None and data.foreign:
        raise UserError(
            f"--instances {data.source} names TFRecord files without an `albert instances` manifest, so "
            f"nothing says which vocabulary built them; pass --vocab (their spm.model or its folder)"
        )
    path = vocab or data.vocab_model
    if path is None:
        return None
    if not path.endswith(".model"):
        path = storage.join(path, "spm.model")
    if not storage.isfile(path):
        raise UserError(f"vocabulary not found: {path} (pass --vocab DIR)")
    if vocab is not None:
        check_vocab(data, path, "--vocab")
    elif data.vocab_sha256 and storage.sha256(path) != data.vocab_sha256:
        raise UserError(
            f"{path} changed since {data.source} was built with it (its sha256 differs from the one in "
            f"manifest.json, e.g. the vocabulary was retrained in place); restore that vocabulary and pass "
            f"it with --vocab, or rebuild the instances"
        )
    return path


def check_token_ids(batch: dict, vocab_size: int, source: str, vocab: str) -> None:
    """Every token id must be a row of the embedding table; else the forward pass fails deep inside
    (an IndexError, or a device-side assert on CUDA). A max over the CPU batch: cheap next to a step."""
    ids = [batch[k] for k in ("input_ids", "masked_lm_ids") if k in batch]
    top = max(int(t.max()) for t in ids)
    low = min(int(t.min()) for t in ids)
    if top >= vocab_size or low < 0:
        bad = top if top >= vocab_size else low
        raise UserError(
            f"{source}: the records hold token id {bad}, outside {vocab} ({vocab_size} ids): they were built "
            f"with another vocabulary; pass the --vocab they were built with"
        )


def check_first_records(data, vocab_size: int, source: str, vocab: str, count: int = 256) -> None:
    """The token ids of the first records against the vocabulary, before any work (the batches of
    the run are checked too, as they come)."""
    from model.data import RecordError, iter_records, parse_examples, to_torch

    first = itertools.islice((r for path in data.files for r, _ in iter_records(path)), count)
    try:
        arrays = parse_examples(list(first), data.lengths, ("input_ids", "masked_lm_ids"))
    except RecordError as err:
        raise RecordError(f"{data.source}: {err} (not an ALBERT pretraining instance)") from None
    check_token_ids(to_torch(arrays), vocab_size, source, vocab)


def check_init_vocabulary(init: str, spm_path: str | None) -> None:
    """--init-checkpoint's weights belong to its spm.model: it must be this run's vocabulary (a
    checkpoint without one, e.g. an imported TF checkpoint, is checked by vocab_size only)."""
    theirs = storage.join(init, "spm.model")
    if spm_path is None or not storage.isfile(theirs):
        return
    if storage.sha256(theirs) != storage.sha256(spm_path):
        raise UserError(
            f"--init-checkpoint {init} was trained with another vocabulary than {spm_path} (its "
            f"spm.model differs): its embeddings would mean other tokens; use instances built with "
            f"its vocabulary"
        )


def micro_batch_plan(
    cfg: TrainConfig, config: AlbertConfig, data, device: torch.device, world: int, precision: str
) -> tuple[int, int, str | None]:
    """(sequences per rank per forward pass, accumulation steps, memory note). "auto" sizes it from
    the device's memory (model/memory.py); on a device of unknown memory (CPU) auto = no
    accumulation, as without the option."""
    batch, requested = cfg.training.batch_size, cfg.training.micro_batch_size
    note = None
    if requested == "auto":
        from model.memory import auto_micro_batch, describe, device_memory, estimate_memory

        memory = device_memory(device)
        shape = dict(seq_len=data.max_seq_length, max_predictions=data.max_predictions)
        common = dict(optimizer=cfg.optim.optimizer, precision=precision, parallel=cfg.runtime.parallel)
        micro = auto_micro_batch(
            config, **shape, batch_size=batch, world_size=world, device_memory_bytes=memory, **common
        )
        estimate = estimate_memory(config, **shape, micro_batch=micro, world_size=world, **common)
        note = "--micro-batch-size auto: " + describe(estimate, batch // world, memory)
    else:
        micro = requested or batch // world
    if micro < 1 or batch % (micro * world):
        raise UserError(f"--batch-size {batch} must be a multiple of micro-batch {micro} x {world} ranks")
    return micro, batch // (micro * world), note


def unigram_output_bias(model: torch.nn.Module, data, vocab_size: int, max_records: int = 50_000) -> None:
    """predictions.bias = log p(label) over (a sample of) the train split, add-one smoothed. The same
    on every rank (the same records, read in file order)."""
    from model.evaluate import label_counts

    counts, _ = label_counts(data, vocab_size, max_records)
    probabilities = (counts + 1.0) / (counts.sum() + vocab_size)
    with torch.no_grad():
        model.predictions.bias.copy_(torch.from_numpy(np.log(probabilities)).float())


def claim_run_folder(out: str, force: bool):
    """--out must be new, empty, a run folder of ours, or taken with --force, writable, and not in use
    by another run (core.outdir.claim), before any work. Returns its lock, held until the
    enclosing scope ends (`albert pretrain`: the command)."""
    from core import outdir

    return outdir.claim(out, "pretrain", force=force, legacy=("train_config.json", "checkpoints"))


def check_resumable(
    cfg: TrainConfig,
    path: str,
    saved: dict,
    content_id: str,
    config: AlbertConfig,
    spm_path: str | None,
    world_size: int,
) -> str | None:
    """The checkpoint at `path` (its trainer.json: `saved`) must continue THIS run: the same settings,
    the same data (by content, so the instances may move, e.g. to gs://, but not change), the same
    model config, vocabulary and world size. Returns a warning for a checkpoint too old to record its
    data."""
    warning = None
    data = saved.get("data")
    if data is None:  # written before checkpoints recorded their data: paths are all there is
        cfg.check_same_run(saved["train_config"])
        warning = (
            f"warning: {path} does not record the data it was trained on (an older checkpoint): "
            f"cannot check that {cfg.instances} still holds it"
        )
    else:
        cfg.check_same_run(saved["train_config"], ignore=("instances", "vocab", "model"))
        if data.get("content_id") != content_id:
            raise UserError(
                f"{cfg.instances} does not hold the data {path} was trained on (its files changed "
                f"since: rebuilt or replaced); resume with that data, or train on this data in a new --out"
            )
    # Both configs through today's AlbertConfig: a field added since takes its default in both.
    theirs = AlbertConfig.from_hf_dict(storage.read_json(storage.join(path, "config.json")))
    theirs, mine = (json.loads(json.dumps(c.to_hf_dict())) for c in (theirs, config))
    diff = sorted(k for k in set(theirs) | set(mine) if theirs.get(k) != mine.get(k))
    if diff:  # e.g. the --config file was edited in place: its path alone did not change
        detail = ", ".join(f"{k}: {theirs.get(k)!r} -> {mine.get(k)!r}" for k in diff[:3])
        raise UserError(
            f"--config {cfg.model.model} now describes another model than {path} ({detail}); resume "
            f"with the config the run started with, or use a new --out"
        )
    their_spm = storage.join(path, "spm.model")
    if spm_path and storage.isfile(their_spm) and storage.sha256(their_spm) != storage.sha256(spm_path):
        raise UserError(
            f"{spm_path} is not the vocabulary {path} was trained with (its spm.model differs); "
            f"resume with that vocabulary, or start a new run in a new --out"
        )
    if saved["world_size"] != world_size:
        raise UserError(
            f"{path} was written by {saved['world_size']} ranks; resume with the same number "
            f"(the data position is per rank)"
        )
    return warning

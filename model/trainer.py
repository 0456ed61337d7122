"""ALBERT pretraining: one readable training step, wrapped by data, checkpoints and logging.

    albert pretrain --instances DIR --config tiny --out runs/ID [--steps N --batch-size B --lr LR ...]

Run it again with the same command and it resumes from the newest valid checkpoint in runs/ID
(model, optimizer, schedule, RNG states and data position), ending with exactly the parameters of an
uninterrupted run.

The step (`Trainer.train_step`), for a global batch of B sequences = world x accumulation micro-batches:

    lr = schedule(step)                                   warmup, then linear decay to 0 from step 0
    W, N = all-reduced number of real MLM predictions and of sequences in the global batch
    for each micro-batch (no gradient sync but on the last):
        loss = world * (sum_w(CE_mlm) / W + sum(CE_sop) / N)  ->  backward
    (so the averaged gradient is exactly that of one batch of B, whatever the split)
    norm = clip_grad_norm_(1.0);  non-finite loss or norm -> skip the update (counted; 5 in a row stop)
    optimizer.step()

Outputs in runs/ID: checkpoints/step-N/ (model.checkpoint), metrics.jsonl, TensorBoard events under
tb/, curves.png at the end, train_config.json (with the first checkpoint).

Before any work the inputs are checked (docs/trust-training.md): the instances (a finished folder, or
foreign TFRecords with --vocab), the vocabulary (the one they were built with: sha256 in their
manifest), the token ids of the first records against it, the model config; then the run folder is
claimed (pipelines.outdir: ours, new, or --force) and a write probed. A resumed run must see the same
data (content id), the same vocabulary and the same settings as its checkpoint.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import sys
import time
import types
from dataclasses import dataclass, field

import numpy as np
import torch

from model import checkpoint as ckpt
from model import distributed as distx
from model.albert import AlbertForPreTraining
from model.config import AlbertConfig
from model.device import resolve_device
from model.optim import Schedule, build_optimizer
from pipelines.core import storage
from pipelines.core.errors import UserError


class TrainingDiverged(UserError):
    """The loss or the gradient stayed non-finite for `max_bad_steps` steps in a row."""


@dataclass
class TrainConfig:
    """Everything that defines a pretraining run. Fields marked (run) may change between a run and
    its resumption; all others must stay the same."""

    instances: str
    """Instance folder (train-*.tfrecord + manifest.json) or a glob of foreign TFRecords."""
    out: str
    """Run folder: checkpoints/, metrics.jsonl, tb/, curves.png."""
    model: str = "tiny"
    """Preset name (tiny, base, large, xlarge, xxlarge) or a config JSON file."""
    vocab: str | None = None
    """spm.model (or its folder); default: the vocabulary named in the instances' manifest. The model's
    vocab_size is set to its size."""
    init_checkpoint: str | None = None
    """Start from these weights (a checkpoint folder: config.json + model.safetensors) instead of a
    random init, e.g. to continue pretraining the production model on new data. Its architecture
    (and vocabulary size) must match the run's config."""
    output_bias_init: str = "unigram"
    """Fresh runs: "unigram" sets the MLM output bias to the log frequency of the masked-token labels
    of the train split (a sample), "zeros" keeps the reference's zero init. With a zero bias, the
    quickest way to the unigram distribution is a constant hidden state: every position collapses to
    the same vector (measured: cosine 0.99999 between positions after 600 steps) and the model sits
    at the most-frequent-token baseline; starting from the unigram, it does not have to."""
    model_overrides: dict = field(default_factory=dict)
    """AlbertConfig fields to override (e.g. {"hidden_dropout_prob": 0.1})."""
    steps: int = 1000
    batch_size: int = 64
    """Global batch: sequences per optimizer step, over all ranks and accumulation micro-batches."""
    micro_batch_size: int | str | None = None
    """Sequences per rank per forward pass; default batch_size / world (no accumulation); "auto": the
    largest that the device's memory holds, by model/memory.py's estimate (CPU: no accumulation)."""
    optimizer: str = "lamb"
    lr: float = 1.76e-3
    warmup_steps: int = 100
    weight_decay: float = 0.01
    clip_norm: float = 1.0
    seed: int = 12345
    shuffle_window: int = 10_000
    device: str = "auto"
    """(run) auto = cuda if available else cpu; cpu, cuda, cuda:N, tpu (model/tpu.py, torch_xla)."""
    precision: str = "auto"
    """auto = bf16 autocast on cuda, fp32 elsewhere; bf16; fp32."""
    compile: bool = False
    """(run) torch.compile the model."""
    parallel: str = "ddp"
    """(run) with several ranks: ddp or fsdp (FSDP2 fully_shard)."""
    num_workers: int = 1
    """(run) loader worker processes per rank (0 = load in the training process)."""
    save_every: int = 500
    """(run)"""
    keep_last: int = 3
    """(run)"""
    log_every: int = 10
    """(run)"""
    eval_every: int = 0
    """(run) evaluate on the eval split every N steps (0 = only at the end)."""
    eval_batches: int = 20
    """(run)"""
    max_bad_steps: int = 5
    """Stop after this many consecutive steps with a non-finite loss or gradient norm."""
    max_minutes: float | None = None
    """(run) wall-clock budget: stop (with a checkpoint) when it is used up."""
    inject_nan_steps: tuple[int, ...] = ()
    """(run) testing: make the loss NaN at these steps."""
    force: bool = False
    """(run) write into an --out that holds other files (pipelines.outdir.claim)."""

    RUN_FIELDS = (
        "out",
        "device",
        "compile",
        "parallel",
        "num_workers",
        "save_every",
        "keep_last",
        "log_every",
        "eval_every",
        "eval_batches",
        "max_minutes",
        "inject_nan_steps",
        "force",
    )

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["inject_nan_steps"] = list(self.inject_nan_steps)
        return d

    def check_same_run(self, saved: dict, ignore: tuple[str, ...] = ()) -> None:
        """Refuse to resume a run saved with other settings (`ignore`: fields compared otherwise)."""
        mine = self.to_dict()
        fixed = [k for k in mine if k not in self.RUN_FIELDS and k not in ignore]
        diff = [k for k in fixed if k in saved and mine[k] != saved[k]]
        if diff:
            detail = ", ".join(f"{k}: {saved[k]!r} -> {mine[k]!r}" for k in diff)
            raise UserError(
                f"{self.out} holds a run with other settings ({detail}); use a new --out, or the same options"
            )


def build_model_config(cfg: TrainConfig, vocab_size: int | None, vocab: str | None = None) -> AlbertConfig:
    """The preset or config file, with --set overrides; vocab_size is the vocabulary's size."""
    if cfg.model.endswith(".json"):
        check_config_fields(cfg.model)
        try:
            config = AlbertConfig.from_json_file(cfg.model)
        except UserError as err:  # not JSON, a value out of range: name the file when it does not
            raise UserError(str(err) if cfg.model in str(err) else f"--config {cfg.model}: {err}") from None
    else:
        config = AlbertConfig.from_preset(cfg.model)
    changes = dict(cfg.model_overrides)
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
        raise UserError(
            f"--set {', '.join(f'{k}={v!r}' for k, v in cfg.model_overrides.items())}: {err}"
        ) from None


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
    import difflib

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

    if cfg.vocab is None and data.foreign:
        raise UserError(
            f"--instances {data.source} names TFRecord files without an `albert instances` manifest, so "
            f"nothing says which vocabulary built them; pass --vocab (their spm.model or its folder)"
        )
    path = cfg.vocab or data.vocab_model
    if path is None:
        return None
    if not path.endswith(".model"):
        path = storage.join(path, "spm.model")
    if not storage.isfile(path):
        raise UserError(f"vocabulary not found: {path} (pass --vocab DIR)")
    if cfg.vocab is not None:
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


def claim_run_folder(out: str, force: bool) -> None:
    """--out must be new, empty, a run folder of ours, or taken with --force, and writable
    (pipelines.outdir.claim), before any work."""
    from pipelines import outdir

    outdir.claim(out, "pretrain", force=force, legacy=("train_config.json", "checkpoints"))


def read_metrics(path: str) -> list[dict]:
    """The records of a metrics.jsonl. A killed run can leave a torn last line: it is skipped."""
    rows = []
    for line in open(path, encoding="utf-8") if os.path.exists(path) else []:
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue
    return rows


class MetricsLog:
    """metrics.jsonl + TensorBoard + a progress line (tqdm on a terminal). Main rank only.

    The files are written in `files` (a storage.Mirror of the run folder: the folder itself when it is
    local, a temporary copy uploaded every `sync_seconds` and at the end when it is a URL)."""

    def __init__(
        self, files: storage.Mirror | None, total_steps: int, start_step: int, sync_seconds: float = 30.0
    ):
        self.enabled = files is not None
        self.files = files
        self.tb = None
        self.bar = None
        self.sync_seconds, self.last_sync = sync_seconds, time.time()
        if files is None:
            return
        self.path = files.path("metrics.jsonl")
        try:
            if "tensorflow" not in sys.modules:
                # TensorBoard's writer would import TensorFlow (4 s, ~1 GB) for its file API; its
                # documented switch "tensorboard.compat.notf" selects the built-in stub instead.
                sys.modules.setdefault("tensorboard.compat.notf", types.ModuleType("tensorboard.compat.notf"))
            from torch.utils.tensorboard import SummaryWriter

            self.tb = SummaryWriter(files.path("tb"), purge_step=start_step or None)
        except ImportError:  # pragma: no cover - tensorboard is a dependency
            self.tb = None
        if sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total_steps, initial=start_step, unit="step", dynamic_ncols=True)

    def write(self, record: dict, progress: str | None = None, advance: int = 0) -> None:
        if not self.enabled:
            return
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        if self.tb is not None:
            prefix = record.get("kind", "train")
            for k, v in record.items():
                if isinstance(v, (int, float)) and k not in ("step", "kind"):
                    self.tb.add_scalar(f"{prefix}/{k}", v, record["step"])
        if time.time() - self.last_sync >= self.sync_seconds:
            self.sync()
        if self.bar is not None:
            self.bar.update(advance)
            if progress:
                self.bar.set_postfix_str(progress)
        elif progress:
            print(progress, file=sys.stderr, flush=True)

    def message(self, text: str) -> None:
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.write(text)
        else:
            print(text, file=sys.stderr, flush=True)

    def sync(self) -> None:
        """Upload what changed (a remote run folder); flushes TensorBoard first."""
        if self.files is None:
            return
        if self.tb is not None:
            self.tb.flush()
        self.files.sync()
        self.last_sync = time.time()

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()
        if self.bar is not None:
            self.bar.close()
        self.sync()


class Trainer:
    def __init__(self, cfg: TrainConfig):
        from model.data import NoSplit, find_instances

        self.cfg = cfg
        if cfg.steps < 1 or cfg.batch_size < 1:
            raise UserError("--steps and --batch-size must be >= 1")
        self.device = resolve_device(cfg.device)
        self.dist = distx.init(self.device.type)
        if self.device.type == "cuda" and self.dist.enabled:
            self.device = torch.device("cuda", self.dist.local_rank)
        if cfg.precision not in ("auto", "bf16", "fp32"):
            raise UserError(f"unknown --precision {cfg.precision!r}")
        bf16 = cfg.precision == "bf16" or (cfg.precision == "auto" and self.device.type == "cuda")
        self.precision = "bf16" if bf16 else "fp32"

        # The inputs, checked before anything is written.
        self.train_data = find_instances(cfg.instances, "train")
        self.spm_path = run_vocabulary(cfg, self.train_data)
        vocab_size = None
        if self.spm_path:
            from pipelines.tokenizer import Tokenizer

            vocab_size = Tokenizer.load(self.spm_path).vocab_size
        self.config = build_model_config(cfg, vocab_size, self.spm_path)
        self.vocab_label = self.spm_path or f"the vocab_size of --config {cfg.model}"
        if self.train_data.max_seq_length > self.config.max_position_embeddings:
            raise UserError(
                f"instances have length {self.train_data.max_seq_length} > max_position_embeddings "
                f"{self.config.max_position_embeddings}"
            )
        self._check_first_records()
        self.micro, self.accum, self.memory_note = self._micro_batch()
        try:  # a missing eval split is allowed; a damaged or partly copied one is not
            self.eval_data = find_instances(cfg.instances, "eval") if storage.isdir(cfg.instances) else None
        except NoSplit:
            self.eval_data = None
        if cfg.init_checkpoint:
            self._check_init_vocabulary(cfg.init_checkpoint)
        # The run folder: ours and writable (main rank; the others learn of a refusal and stop too).
        distx.on_main(lambda: claim_run_folder(cfg.out, cfg.force), self.dist)

        torch.manual_seed(cfg.seed)  # the same initial weights on every rank
        self.model = AlbertForPreTraining(self.config)
        if cfg.init_checkpoint:
            from model.convert import load_state, read_checkpoint

            init_config, state, _ = read_checkpoint(cfg.init_checkpoint)
            if init_config.vocab_size != self.config.vocab_size:
                raise UserError(
                    f"--init-checkpoint has vocab_size {init_config.vocab_size}, this run {self.config.vocab_size}"
                )
            load_state(self.model, state, source=cfg.init_checkpoint)
        elif cfg.output_bias_init not in ("unigram", "zeros"):
            raise UserError(f"unknown --output-bias-init {cfg.output_bias_init!r}; expected unigram or zeros")
        elif cfg.output_bias_init == "unigram" and not ckpt.list_steps(cfg.out):
            self._unigram_output_bias()  # not when resuming: the checkpoint's weights replace it
        self.model.to(self.device)
        self.wrapped = distx.wrap(self.model, self.dist, cfg.parallel, self.device)
        self.forward = torch.compile(self.wrapped) if cfg.compile else self.wrapped
        self.optimizer = build_optimizer(self.model, cfg.optimizer, cfg.lr, cfg.weight_decay)
        self.schedule = Schedule(cfg.lr, cfg.warmup_steps, cfg.steps)
        dev_type = "cuda" if self.device.type == "cuda" else "cpu"
        self.autocast = (
            (lambda: torch.autocast(dev_type, dtype=torch.bfloat16)) if bf16 else contextlib.nullcontext
        )

        self.step = 0
        self.counters = {"skipped_steps": 0, "tokens": 0, "sequences": 0, "train_seconds": 0.0}
        self.position = None
        self.resumed_from = None
        # The run folder's logs (metrics.jsonl, tb/, curves.png), written by the main rank; a local
        # working copy when the folder is a URL (storage.Mirror).
        self.files = storage.Mirror(cfg.out) if self.dist.is_main else None
        torch.manual_seed(cfg.seed + 1000 * self.dist.rank)  # dropout streams differ per rank
        self._maybe_resume()

    def _micro_batch(self) -> tuple[int, int, str | None]:
        """(sequences per rank per forward pass, accumulation steps, memory note). "auto" sizes it from
        the device's memory (model/memory.py); on a device of unknown memory (CPU) auto = no
        accumulation, as without the option."""
        cfg, world = self.cfg, self.dist.world_size
        note = None
        if cfg.micro_batch_size == "auto":
            from model.memory import auto_micro_batch, describe, device_memory, estimate_memory

            memory = device_memory(self.device)
            shape = dict(
                seq_len=self.train_data.max_seq_length, max_predictions=self.train_data.max_predictions
            )
            common = dict(optimizer=cfg.optimizer, precision=self.precision, parallel=cfg.parallel)
            micro = auto_micro_batch(
                self.config, **shape, batch_size=cfg.batch_size, world_size=world, device_memory_bytes=memory,
                **common,
            )  # fmt: skip
            estimate = estimate_memory(self.config, **shape, micro_batch=micro, world_size=world, **common)
            note = "--micro-batch-size auto: " + describe(estimate, cfg.batch_size // world, memory)
        elif cfg.micro_batch_size is None or isinstance(cfg.micro_batch_size, int):
            micro = cfg.micro_batch_size or cfg.batch_size // world
        else:
            raise UserError(f"--micro-batch-size must be a number or auto, not {cfg.micro_batch_size!r}")
        if micro < 1 or cfg.batch_size % (micro * world):
            raise UserError(
                f"--batch-size {cfg.batch_size} must be a multiple of micro-batch {micro} x {world} ranks"
            )
        return micro, cfg.batch_size // (micro * world), note

    def _check_first_records(self, count: int = 256) -> None:
        """The token ids of the first records against the vocabulary, before any work (the batches of
        the run are checked too, as they come)."""
        import itertools

        from model.data import RecordError, iter_records, parse_examples, to_torch

        data = self.train_data
        first = itertools.islice((r for path in data.files for r, _ in iter_records(path)), count)
        try:
            arrays = parse_examples(list(first), data.lengths, ("input_ids", "masked_lm_ids"))
        except RecordError as err:
            raise RecordError(f"{data.source}: {err} (not an ALBERT pretraining instance)") from None
        check_token_ids(to_torch(arrays), self.config.vocab_size, self.cfg.instances, self.vocab_label)

    def _check_init_vocabulary(self, init: str) -> None:
        """--init-checkpoint's weights belong to its spm.model: it must be this run's vocabulary (a
        checkpoint without one, e.g. an imported TF checkpoint, is checked by vocab_size only)."""
        theirs = storage.join(init, "spm.model")
        if self.spm_path is None or not storage.isfile(theirs):
            return
        if storage.sha256(theirs) != storage.sha256(self.spm_path):
            raise UserError(
                f"--init-checkpoint {init} was trained with another vocabulary than {self.spm_path} (its "
                f"spm.model differs): its embeddings would mean other tokens; use instances built with "
                f"its vocabulary"
            )

    def _unigram_output_bias(self, max_records: int = 50_000) -> None:
        """predictions.bias = log p(label) over (a sample of) the train split, add-one smoothed. The same
        on every rank (the same records, read in file order)."""
        from model.evaluate import label_counts

        counts, _ = label_counts(self.train_data, self.config.vocab_size, max_records)
        p = (counts + 1.0) / (counts.sum() + self.config.vocab_size)
        with torch.no_grad():
            self.model.predictions.bias.copy_(torch.from_numpy(np.log(p)).float())

    # -- resume / save -----------------------------------------------------------------------------

    def _maybe_resume(self) -> None:
        from model.data import Position

        path = ckpt.latest(self.cfg.out)
        if path is None:
            # A fresh run. The settings lock with the first checkpoint (train_config.json is written
            # with it): a run that failed before one can be rerun with corrected options. The log of
            # such a run is dropped, not continued.
            if self.files is not None and os.path.exists(self.files.path("metrics.jsonl")):
                os.remove(self.files.path("metrics.jsonl"))
            return
        loaded = ckpt.load(path)
        state = loaded.trainer
        self._check_resumable(path, state)
        ckpt.load_model_state(self.model, loaded.model_tensors)
        ckpt.load_optimizer_state(self.model, self.optimizer, loaded.optimizer_tensors, loaded.optimizer_json)
        mine = state["ranks"][self.dist.rank]
        ckpt.set_rng_state(
            mine["rng"],
            {k.split("@")[0]: v for k, v in loaded.rng_tensors.items() if k.endswith(f"@{self.dist.rank}")},
        )
        self.position = Position.from_dict(mine["data"])
        self.step = state["step"]
        self.counters.update(state["counters"])
        self.resumed_from = path
        if self.files is not None:  # main rank: continue metrics.jsonl, minus what came after the checkpoint
            self.files.pull("metrics.jsonl")
            metrics = self.files.path("metrics.jsonl")
            rows = [r for r in read_metrics(metrics) if r.get("step", 0) <= self.step]
            with open(metrics, "w", encoding="utf-8") as f:
                f.writelines(json.dumps(r) + "\n" for r in rows)

    def _check_resumable(self, path: str, state: dict) -> None:
        """The checkpoint must continue THIS run: the same settings, the same data (by content, so the
        instances may move, e.g. to gs://, but not change), the same vocabulary, the same world size."""
        data = state.get("data")
        if data is None:  # written before checkpoints recorded their data: paths are all there is
            self.cfg.check_same_run(state["train_config"])
            if self.dist.is_main:
                print(
                    f"warning: {path} does not record the data it was trained on (an older checkpoint): "
                    f"cannot check that {self.cfg.instances} still holds it",
                    file=sys.stderr,
                    flush=True,
                )
        else:
            self.cfg.check_same_run(state["train_config"], ignore=("instances", "vocab", "model"))
            if data.get("content_id") != self.train_data.content_id:
                raise UserError(
                    f"{self.cfg.instances} does not hold the data {path} was trained on (its files changed "
                    f"since: rebuilt or replaced); resume with that data, or train on this data in a new --out"
                )
        # Both configs through today's AlbertConfig: a field added since takes its default in both.
        saved_model = AlbertConfig.from_hf_dict(storage.read_json(storage.join(path, "config.json")))
        saved_model, model = (json.loads(json.dumps(c.to_hf_dict())) for c in (saved_model, self.config))
        diff = sorted(k for k in set(saved_model) | set(model) if saved_model.get(k) != model.get(k))
        if diff:  # e.g. the --config file was edited in place: its path alone did not change
            detail = ", ".join(f"{k}: {saved_model.get(k)!r} -> {model.get(k)!r}" for k in diff[:3])
            raise UserError(
                f"--config {self.cfg.model} now describes another model than {path} ({detail}); resume "
                f"with the config the run started with, or use a new --out"
            )
        theirs = storage.join(path, "spm.model")
        if (
            self.spm_path
            and storage.isfile(theirs)
            and storage.sha256(theirs) != storage.sha256(self.spm_path)
        ):
            raise UserError(
                f"{self.spm_path} is not the vocabulary {path} was trained with (its spm.model differs); "
                f"resume with that vocabulary, or start a new run in a new --out"
            )
        if state["world_size"] != self.dist.world_size:
            raise UserError(
                f"{path} was written by {state['world_size']} ranks; resume with the same number "
                f"(the data position is per rank)"
            )

    def _checkpoint_config(self) -> dict:
        config_json = self.config.to_hf_dict()
        config_json["architectures"] = ["AlbertForPreTraining"]
        return config_json

    def save(self) -> str:
        """Gather everything (collective), write step-N on rank 0, wait for it."""
        model_tensors = ckpt.model_state(self.model)
        opt_tensors, opt_json = ckpt.optimizer_state(self.model, self.optimizer)
        rng = ckpt.rng_state()
        mine = {"rank": self.dist.rank, "data": self.position.to_dict(), "rng": rng["json"]}
        ranks = distx.all_gather_objects(mine, self.dist)
        rng_tensors = distx.all_gather_objects(rng["tensors"], self.dist)
        path = None
        if self.dist.is_main:
            path = ckpt.save(
                self.cfg.out,
                self.step,
                config_json=self._checkpoint_config(),
                model_tensors=model_tensors,
                optimizer_tensors=opt_tensors,
                optimizer_json=opt_json,
                trainer_json={
                    "step": self.step,
                    "world_size": self.dist.world_size,
                    "schedule": self.schedule.state_dict(),
                    "counters": self.counters,
                    "train_config": self.cfg.to_dict(),
                    "data": {"instances": self.cfg.instances, "content_id": self.train_data.content_id},
                    "ranks": ranks,
                },
                rng_tensors={f"{k}@{r}": v for r, t in enumerate(rng_tensors) for k, v in t.items()},
                spm_model=self.spm_path,
                keep=self.cfg.keep_last,
            )
            # The run's settings, for people and for `outdir` (a run folder); they lock from now on.
            storage.write_json(storage.join(self.cfg.out, "train_config.json"), self.cfg.to_dict(), indent=1)
        distx.barrier(self.dist)
        return path or ckpt.step_dir(self.cfg.out, self.step)

    # -- data --------------------------------------------------------------------------------------

    def _batches(self):
        from model.data import InstanceStream, make_loader

        stream = InstanceStream(
            self.train_data,
            self.micro,
            seed=self.cfg.seed,
            shuffle_window=self.cfg.shuffle_window,
            rank=self.dist.rank,
            world_size=self.dist.world_size,
            start=self.position,
        )
        if self.device.type == "xla":
            from model.tpu import device_loader

            return device_loader(make_loader(stream, self.cfg.num_workers), self.device)
        return iter(make_loader(stream, self.cfg.num_workers, pin_memory=self.device.type == "cuda"))

    def _eval_batches(self):
        """The first eval_batches batches of the eval split, in order. The stream repeats (epochs=None),
        so every rank runs the same number of forward passes (FSDP2's all-gathers are collective)."""
        from model.data import InstanceStream

        stream = InstanceStream(
            self.eval_data, self.micro, shuffle_window=0, rank=self.dist.rank, world_size=self.dist.world_size
        )
        return stream.batches()

    # -- the step ----------------------------------------------------------------------------------

    def train_step(self, micro_batches: list[dict[str, torch.Tensor]]) -> dict[str, float]:
        """One optimizer step over the global batch (this rank's micro-batches). Returns its metrics."""
        cfg, world = self.cfg, self.dist.world_size
        lr = self.schedule.apply(self.optimizer, self.step)
        batches = [{k: v.to(self.device, non_blocking=True) for k, v in b.items()} for b in micro_batches]
        # Global normalisers: real predictions W and sequences N over all ranks and micro-batches.
        counts = torch.tensor(
            [
                float(sum(b["masked_lm_weights"].sum().item() for b in micro_batches)),
                float(sum(len(b["input_ids"]) for b in micro_batches)),
                float(sum(b["attention_mask"].sum().item() for b in micro_batches)),
            ],
            dtype=torch.float64,
        )
        distx.all_reduce_sum(counts, self.dist)
        W, N, tokens = counts.tolist()
        sums = torch.zeros(6, dtype=torch.float64)
        for k, b in enumerate(batches):
            with distx.no_sync(self.wrapped, k < len(batches) - 1), self.autocast():
                out = self.forward(**b)
                mlm_sum = out.mlm_loss * out.mlm_weight  # sum of weighted CE of this micro-batch
                sop_sum = out.sop_loss * out.sop_count
                loss = world * (mlm_sum / max(W, 1.0) + sop_sum / N)
                if self.step in cfg.inject_nan_steps:
                    loss = loss * float("nan")
            loss.backward()
            sums += torch.stack(
                [
                    mlm_sum.detach().double().cpu(),
                    out.mlm_correct.double().cpu(),
                    sop_sum.detach().double().cpu(),
                    out.sop_correct.double().cpu(),
                    torch.tensor(float(not torch.isfinite(loss.detach()).item()), dtype=torch.float64),
                    torch.zeros((), dtype=torch.float64),
                ]
            )
        distx.all_reduce_sum(sums, self.dist)
        mlm_sum, mlm_correct, sop_sum, sop_correct, bad_loss, _ = sums.tolist()
        params = [p for p in self.model.parameters() if p.grad is not None]
        norm = torch.nn.utils.clip_grad_norm_(params, cfg.clip_norm if cfg.clip_norm > 0 else float("inf"))
        norm = float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)
        finite = bad_loss == 0 and math.isfinite(norm)
        if finite:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.device.type == "xla":
            from model.tpu import mark_step

            mark_step()
        return {
            "loss": (mlm_sum / max(W, 1.0) + sop_sum / N) if finite else float("nan"),
            "mlm_loss": mlm_sum / max(W, 1.0),
            "sop_loss": sop_sum / N,
            "mlm_acc": mlm_correct / max(W, 1.0),
            "sop_acc": sop_correct / N,
            "lr": lr,
            "grad_norm": norm,
            "finite": finite,
            "tokens": tokens,
            "sequences": N,
            "predictions": W,
        }

    # -- the loop ----------------------------------------------------------------------------------

    def evaluate(self) -> dict[str, float] | None:
        from model.evaluate import eval_sums, summarize

        if self.eval_data is None:
            return None
        # The unwrapped model: DDP's forward would sync buffers; FSDP2 shards the model in place.
        s = eval_sums(self.model, self._eval_batches(), self.device, self.autocast, self.cfg.eval_batches)
        t = torch.tensor([s[k] for k in sorted(s)], dtype=torch.float64)
        distx.all_reduce_sum(t, self.dist)
        return summarize(dict(zip(sorted(s), t.tolist())))

    def fit(self) -> dict:
        cfg = self.cfg
        log = MetricsLog(self.files, cfg.steps, self.step)
        if self.resumed_from:
            log.message(f"resumed from {self.resumed_from} (step {self.step})")
        if self.memory_note:
            log.message(self.memory_note)
        log.message(
            f"model {self.model.num_parameters():,} parameters (vocab {self.config.vocab_size}), "
            f"{self.dist.world_size} rank(s) x {self.accum} micro-batch(es) of {self.micro} = batch "
            f"{cfg.batch_size}, L={self.train_data.max_seq_length}, {cfg.optimizer} lr {cfg.lr}, "
            f"{self.device} {self.precision}{' compiled' if cfg.compile else ''}"
        )
        batches = self._batches()
        started = time.time()
        window = {"t": time.time(), "steps": 0, "tokens": 0.0, "sums": {}}
        consecutive_bad, last_saved = 0, self.step if self.resumed_from else None
        stop_reason = "done"
        # Testing hook: ALBERT_TEST_SLEEP_AT_STEP=N:SECONDS pauses after step N, so a test can kill
        # the process at a known point and rerun the very same command.
        hook = os.environ.get("ALBERT_TEST_SLEEP_AT_STEP")
        sleep_at = (int(hook.split(":")[0]), float(hook.split(":")[1])) if hook else None
        try:
            while self.step < cfg.steps:
                micro = []
                for _ in range(self.accum):
                    batch, self.position = next(batches)
                    check_token_ids(batch, self.config.vocab_size, cfg.instances, self.vocab_label)
                    micro.append(batch)
                m = self.train_step(micro)
                self.step += 1
                self.counters["tokens"] += int(m["tokens"])
                self.counters["sequences"] += int(m["sequences"])
                if not m["finite"]:
                    consecutive_bad += 1
                    self.counters["skipped_steps"] += 1
                    log.message(
                        f"step {self.step}: non-finite loss or gradient, update skipped ({consecutive_bad} in a row)"
                    )
                    if consecutive_bad >= cfg.max_bad_steps:
                        good = ckpt.latest(cfg.out)
                        # The settings lock with the first checkpoint: a lower --lr reruns in place only
                        # when there is none yet.
                        how = (
                            f"Last good checkpoint: {good}. Lower --lr in a new --out (--init-checkpoint "
                            f"{good} to start from its weights), or check the data."
                            if good
                            else "No checkpoint yet: rerun with a lower --lr, or check the data."
                        )
                        raise TrainingDiverged(
                            f"loss/gradient non-finite for {consecutive_bad} steps in a row (steps "
                            f"{self.step - consecutive_bad + 1}-{self.step}); stopped without writing a checkpoint. "
                            + how
                        )
                else:
                    consecutive_bad = 0
                for k in ("loss", "mlm_loss", "sop_loss", "mlm_acc", "sop_acc", "grad_norm"):
                    if m["finite"]:
                        window["sums"][k] = window["sums"].get(k, 0.0) + m[k]
                window["steps"] += 1
                window["good"] = window.get("good", 0) + int(m["finite"])
                window["tokens"] += m["tokens"]
                if self.step % cfg.log_every == 0 or self.step == cfg.steps:
                    self._log_window(log, window, m["lr"], started)
                    window = {"t": time.time(), "steps": 0, "tokens": 0.0, "sums": {}}
                if cfg.eval_every and self.step % cfg.eval_every == 0 and self.step < cfg.steps:
                    self._log_eval(log)
                if sleep_at and self.step == sleep_at[0]:
                    time.sleep(sleep_at[1])
                out_of_time = False
                if cfg.max_minutes is not None and self.step % cfg.log_every == 0:  # rank 0's clock decides
                    spent = self.counters["train_seconds"] + time.time() - started
                    out_of_time = bool(distx.broadcast_object(spent > cfg.max_minutes * 60, self.dist))
                due = self.step % cfg.save_every == 0 and self.step < cfg.steps
                if (due or out_of_time) and consecutive_bad == 0:  # never in a streak of bad steps
                    self.counters["train_seconds"] += time.time() - started
                    started = time.time()
                    path = self.save()
                    last_saved = self.step
                    log.message(f"saved {path}")
                    log.sync()
                if out_of_time:
                    stop_reason = f"time budget of {cfg.max_minutes} min used up at step {self.step}"
                    break
            self.counters["train_seconds"] += time.time() - started
            started = time.time()
            final_eval = self._log_eval(log) if self.eval_data is not None else None
            path = ckpt.step_dir(cfg.out, self.step)
            if last_saved != self.step:
                path = self.save()
                log.message(f"saved {path}")
            if self.files is not None:
                plot_curves(self.files.local)
            return {
                "step": self.step,
                "checkpoint": path,
                "stop": stop_reason,
                "eval": final_eval,
                **self.counters,
            }
        finally:
            log.close()

    def _log_window(self, log: MetricsLog, window: dict, lr: float, started: float) -> None:
        elapsed = time.time() - window["t"]
        good = max(window.get("good", 0), 1)
        rec = {"kind": "train", "step": self.step}
        rec.update({k: v / good for k, v in window["sums"].items()})
        rec.update(
            lr=lr,
            tokens_per_s=window["tokens"] / max(elapsed, 1e-9),
            steps_per_s=window["steps"] / max(elapsed, 1e-9),
            skipped_steps=self.counters["skipped_steps"],
            elapsed_s=self.counters["train_seconds"] + time.time() - started,
        )
        eta = (self.cfg.steps - self.step) / max(rec["steps_per_s"], 1e-9)
        progress = (
            f"step {self.step}/{self.cfg.steps} loss {rec.get('loss', float('nan')):.4f} "
            f"mlm_acc {rec.get('mlm_acc', 0):.3f} sop_acc {rec.get('sop_acc', 0):.3f} lr {lr:.3g} "
            f"{rec['tokens_per_s']:,.0f} tok/s ETA {_hms(eta)}"
        )
        log.write(rec, progress, advance=window["steps"])

    def _log_eval(self, log: MetricsLog) -> dict | None:
        metrics = self.evaluate()
        if metrics is None:
            return None
        log.write({"kind": "eval", "step": self.step, **metrics})
        log.message(
            f"eval step {self.step}: mlm_acc {metrics['masked_lm_accuracy']:.4f} "
            f"sop_acc {metrics['sentence_order_accuracy']:.4f} loss "
            f"{metrics['masked_lm_loss'] + metrics['sentence_order_loss']:.4f}"
        )
        return metrics


def _hms(seconds: float) -> str:
    seconds = int(max(0, seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def plot_curves(run_dir: str) -> str | None:
    """curves.png from metrics.jsonl in a local folder (the run folder or its Mirror): loss (train,
    eval) and MLM/SOP accuracy against the step."""
    path = os.path.join(run_dir, "metrics.jsonl")
    rows = read_metrics(path)
    if not rows:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    train = [r for r in rows if r.get("kind") == "train" and "loss" in r]
    evals = [r for r in rows if r.get("kind") == "eval"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    if train:
        steps = [r["step"] for r in train]
        ax1.plot(steps, [r["loss"] for r in train], label="train loss")
        ax1.plot(steps, [r["mlm_loss"] for r in train], label="train MLM loss", alpha=0.6)
        ax2.plot(steps, [r["mlm_acc"] for r in train], label="train MLM acc")
        ax2.plot(steps, [r["sop_acc"] for r in train], label="train SOP acc", alpha=0.6)
    if evals:
        steps = [r["step"] for r in evals]
        ax1.plot(
            steps, [r["masked_lm_loss"] + r["sentence_order_loss"] for r in evals], "o-", label="eval loss"
        )
        ax2.plot(steps, [r["masked_lm_accuracy"] for r in evals], "o-", label="eval MLM acc")
        ax2.plot(steps, [r["sentence_order_accuracy"] for r in evals], "o-", label="eval SOP acc")
    ax1.set_xlabel("step")
    ax1.set_ylabel("loss")
    ax2.set_xlabel("step")
    ax2.set_ylabel("accuracy")
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    out = os.path.join(run_dir, "curves.png")
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def train(cfg: TrainConfig) -> dict:
    """Build, resume if possible, train, save. Returns a summary (step, final checkpoint, counters)."""
    trainer = Trainer(cfg)
    try:
        summary = trainer.fit()
        return summary if trainer.dist.is_main else None
    finally:
        if trainer.files is not None:
            trainer.files.close()  # uploads what is left (a remote run folder), removes the copy
        distx.shutdown()

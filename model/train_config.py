"""What defines a pretraining run: one typed config in sections, from which `albert pretrain`'s
argparse, trainer.json's record and the torchrun argv are all generated (core.config_cli).

    TrainConfig(instances, out)         the two required options
      .data        DataConfig           vocabulary and reading: --vocab --shuffle-window --num-workers
      .model       ModelConfig          --config (preset or JSON) --set --init-checkpoint --output-bias-init
      .optim       OptimConfig          --optimizer --lr --warmup-steps --weight-decay --clip-norm
      .training    TrainingConfig       --steps --batch-size --micro-batch-size --seed --precision ...
      .checkpoint  CheckpointConfig     --save-every --keep-last --force
      .logging     LoggingConfig        --log-every --eval-every --eval-batches
      .runtime     RuntimeConfig        --device --compile --deterministic --parallel --max-minutes

The command line is flat: a field's flag is its name with dashes (`warmup_steps` -> --warmup-steps)
unless it says otherwise, and trainer.json / train_config.json record the same flat names
(`TrainConfig.to_dict`). Options marked run=True may change between a run and its resumption (where
the run is written, how it is logged and checkpointed, on what hardware); all others define the run
and must stay the same (`check_same_run`).

This module imports no torch: the flows build and check a TrainConfig without loading the trainer.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import Any

from core import config_cli
from core.config_cli import opt, section
from core.errors import UserError


def micro_batch(text: str) -> int | str:
    """--micro-batch-size: a positive number or "auto"."""
    if text == "auto":
        return text
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number or auto, not {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number or auto, not {text!r}")
    return value


def model_override(text: str) -> tuple[str, Any]:
    """--set FIELD=VALUE -> (FIELD, VALUE as JSON when it parses as JSON, else the text)."""
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"--set expects FIELD=VALUE, got {text!r}")
    key, value = text.split("=", 1)
    try:
        return key.strip(), json.loads(value)
    except json.JSONDecodeError:
        return key.strip(), value


@dataclass
class DataConfig:
    vocab: str | None = opt(None, "spm.model or its folder (default: from the instances)")
    # The model's vocab_size is set to the vocabulary's size.
    shuffle_window: int = opt(10_000)
    num_workers: int = opt(1, "loader processes per rank", run=True)  # 0 = load in the training process


@dataclass
class ModelConfig:
    model: str = opt(
        "tiny", "tiny, base, large, xlarge, xxlarge or a config JSON", flag="--config", metavar="CONFIG"
    )
    # A preset name or a config JSON file (recorded as "model" in trainer.json).
    model_overrides: dict[str, Any] = opt(
        help="override a model config field, e.g. --set hidden_dropout_prob=0.1 (repeatable)",
        flag="--set",
        metavar="FIELD=VALUE",
        parse=model_override,
        repeat=True,
        default_factory=dict,
    )
    init_checkpoint: str | None = opt(None, "start from these weights (checkpoint folder) instead of random")
    # e.g. to continue pretraining the production model on new data; its architecture and vocabulary
    # size must match the run's config.
    output_bias_init: str = opt(
        "unigram",
        "MLM output bias of a fresh run: log label frequencies (default) or zeros (the reference)",
        choices=("unigram", "zeros"),
    )
    # With a zero bias, the quickest way to the unigram distribution is a constant hidden state: every
    # position collapses to the same vector (measured: cosine 0.99999 between positions after 600
    # steps) and the model sits at the most-frequent-token baseline; from the unigram it need not.

    def __post_init__(self):
        self.model_overrides = dict(self.model_overrides)  # the parser gives (FIELD, VALUE) pairs


@dataclass
class OptimConfig:
    optimizer: str = opt("lamb", choices=("lamb", "adamw"))
    lr: float = opt(1.76e-3)
    warmup_steps: int = opt(100)
    weight_decay: float = opt(0.01)
    clip_norm: float = opt(1.0, "global gradient norm (0 = off)")


@dataclass
class TrainingConfig:
    steps: int = opt(1000)
    batch_size: int = opt(64, "global batch (all ranks)")
    # Sequences per optimizer step, over all ranks and accumulation micro-batches.
    micro_batch_size: int | str | None = opt(
        None,
        "sequences per rank per forward; batch/(micro x ranks) = gradient accumulation steps; "
        "auto = the largest the device's memory holds (docs/memory.md; CPU: no accumulation)",
        parse=micro_batch,
    )
    seed: int = opt(12345)
    precision: str = opt("auto", choices=("auto", "bf16", "fp32"))
    # auto = bf16 autocast on cuda, fp32 elsewhere.
    max_bad_steps: int = opt(5)
    # Stop after this many consecutive steps with a non-finite loss or gradient norm.


@dataclass
class CheckpointConfig:
    save_every: int = opt(500, run=True)
    keep_last: int = opt(3, run=True)
    force: bool = opt(
        False,
        "write into an --out that holds other files (pretrain replaces only the files it writes)",
        run=True,
    )


@dataclass
class LoggingConfig:
    log_every: int = opt(10, run=True)
    eval_every: int = opt(0, "0 = evaluate at the end only", run=True)
    eval_batches: int = opt(20, run=True)


@dataclass
class RuntimeConfig:
    device: str = opt("auto", "auto (cuda if available, else cpu), cpu, cuda, tpu", run=True)
    # tpu: model/tpu.py (torch_xla).
    compile: bool = opt(False, "torch.compile the model", run=True)
    deterministic: bool = opt(
        False,
        "bit-exact reruns and resumes on CUDA: deterministic kernels, flash attention only (slower)",
        run=True,
    )
    # model/device.py: make_deterministic. CPU runs are bit-exact without it.
    parallel: str = opt("ddp", "with several ranks", choices=("ddp", "fsdp"), run=True)
    # ddp, or fsdp (FSDP2 fully_shard).
    max_minutes: float | None = opt(None, "stop (with a checkpoint) after this long", run=True)


@dataclass
class TrainConfig:
    """Everything that defines a pretraining run (the module docstring)."""

    instances: str = opt(help="instance folder (or a glob of foreign TFRecords)")
    out: str = opt(help="run folder runs/ID: rerun the same command to resume", run=True)
    data: DataConfig = section(DataConfig)
    model: ModelConfig = section(ModelConfig)
    optim: OptimConfig = section(OptimConfig)
    training: TrainingConfig = section(TrainingConfig)
    checkpoint: CheckpointConfig = section(CheckpointConfig)
    logging: LoggingConfig = section(LoggingConfig)
    runtime: RuntimeConfig = section(RuntimeConfig)

    @classmethod
    def from_flat(cls, **values: Any) -> TrainConfig:
        """A config from option names, as trainer.json records them (the others at their default)."""
        unknown = sorted(set(values) - {f.name for f, _ in config_cli.leaves(cls)})
        if unknown:
            raise TypeError(f"TrainConfig has no option {unknown[0]!r}")
        return config_cli.from_args(cls, values)

    def to_dict(self) -> dict[str, Any]:
        """{option: value}, flat: what trainer.json and train_config.json record."""
        return config_cli.flat(self)

    def check(self) -> None:
        """What the parser cannot check (a config built in Python, or from a flow's parameters)."""
        training = self.training
        if training.steps < 1 or training.batch_size < 1:
            raise UserError("--steps and --batch-size must be >= 1")
        if training.precision not in ("auto", "bf16", "fp32"):
            raise UserError(f"unknown --precision {training.precision!r}")
        if self.runtime.device == "tpu" and (self.runtime.compile or self.runtime.parallel == "fsdp"):
            raise UserError("--device tpu runs neither --compile nor --parallel fsdp yet (docs/tpu.md)")
        micro_batch_size = training.micro_batch_size
        if not (micro_batch_size in (None, "auto") or isinstance(micro_batch_size, int)):
            raise UserError(f"--micro-batch-size must be a number or auto, not {micro_batch_size!r}")
        if not self.model.init_checkpoint and self.model.output_bias_init not in ("unigram", "zeros"):
            raise UserError(
                f"unknown --output-bias-init {self.model.output_bias_init!r}; expected unigram or zeros"
            )
        values = self.to_dict()
        for field, _ in config_cli.leaves(TrainConfig):  # the other options with a fixed set of values
            choices = field.metadata["choices"]
            if (
                choices
                and field.name not in ("precision", "output_bias_init")
                and values[field.name] not in choices
            ):
                expected = " or ".join(choices)
                raise UserError(
                    f"unknown {config_cli.flag_of(field)} {values[field.name]!r}; expected {expected}"
                )
        from core.outdir import check_apart

        config = self.model.model if self.model.model.endswith(".json") else None
        read = [("the input --instances", self.instances), ("the input --vocab", self.data.vocab)]
        read += [("the input --config", config), ("the input --init-checkpoint", self.model.init_checkpoint)]
        if self.out:  # empty: not named yet (the pretrain flow names its run folder by this config's key)
            check_apart(self.out, read)

    def check_same_run(self, saved: dict, ignore: tuple[str, ...] = ()) -> None:
        """Refuse to resume a run saved with other settings (`ignore`: options compared otherwise).
        `saved` is a trainer.json "train_config"; options it does not record are not compared."""
        mine, run = self.to_dict(), config_cli.run_options(TrainConfig)
        diff = [k for k in mine if k not in run and k not in ignore and k in saved and mine[k] != saved[k]]
        if diff:
            detail = ", ".join(f"{k}: {saved[k]!r} -> {mine[k]!r}" for k in diff)
            raise UserError(
                f"{self.out} holds a run with other settings ({detail}); use a new --out, or the same options"
            )


def train_argv(cfg: TrainConfig) -> list[str]:
    """The `albert pretrain` flags that rebuild cfg (config_cli.to_argv; --set once per override)."""
    overrides = cfg.model.model_overrides.items()
    sets = [arg for k, v in overrides for arg in ("--set", f"{k}={json.dumps(v)}")]
    return config_cli.to_argv(cfg, skip=("model_overrides",)) + sets

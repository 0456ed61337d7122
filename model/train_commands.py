"""`albert pretrain`, `albert evaluate`, `albert finetune`: the command-line side of training.

flows/cli.py registers the three names against this module; `add_arguments` sees which one it is
building from the parser's prog ("albert pretrain" ...) and `run` dispatches on it.

    albert pretrain --instances DIR --config tiny|base|...|FILE.json --out runs/ID [options]
    albert evaluate --checkpoint DIR --instances DIR [--out FILE.json]
    albert finetune --checkpoint DIR --task NAME | --train FILE --dev FILE [--test FILE]

Several processes: `torchrun --nproc_per_node N -m flows.cli pretrain ...` (DDP; --parallel fsdp).
"""

from __future__ import annotations

import argparse
import json
import sys

from pipelines.core.errors import UserError


def _pretrain_arguments(p: argparse.ArgumentParser) -> None:
    from model.trainer import TrainConfig

    d = TrainConfig(instances="", out="")
    p.add_argument("--instances", required=True, help="instance folder (or a glob of foreign TFRecords)")
    p.add_argument("--out", required=True, help="run folder runs/ID: rerun the same command to resume")
    p.add_argument(
        "--force",
        action="store_true",
        help="write into an --out that holds other files (pretrain replaces only the files it writes)",
    )
    p.add_argument("--config", default=d.model, help="tiny, base, large, xlarge, xxlarge or a config JSON")
    p.add_argument("--vocab", default=None, help="spm.model or its folder (default: from the instances)")
    p.add_argument(
        "--init-checkpoint",
        default=None,
        help="start from these weights (checkpoint folder) instead of random",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override a model config field, e.g. --set hidden_dropout_prob=0.1 (repeatable)",
    )
    p.add_argument(
        "--output-bias-init",
        choices=("unigram", "zeros"),
        default=d.output_bias_init,
        help="MLM output bias of a fresh run: log label frequencies (default) or zeros (the reference)",
    )
    p.add_argument("--steps", type=int, default=d.steps)
    p.add_argument("--batch-size", type=int, default=d.batch_size, help="global batch (all ranks)")
    p.add_argument(
        "--micro-batch-size",
        type=_micro_batch,
        default=None,
        help="sequences per rank per forward; batch/(micro x ranks) = gradient accumulation steps; "
        "auto = the largest the device's memory holds (docs/memory.md; CPU: no accumulation)",
    )
    p.add_argument("--optimizer", choices=("lamb", "adamw"), default=d.optimizer)
    p.add_argument("--lr", type=float, default=d.lr)
    p.add_argument("--warmup-steps", type=int, default=d.warmup_steps)
    p.add_argument("--weight-decay", type=float, default=d.weight_decay)
    p.add_argument("--clip-norm", type=float, default=d.clip_norm, help="global gradient norm (0 = off)")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--shuffle-window", type=int, default=d.shuffle_window)
    p.add_argument("--device", default=d.device, help="auto (cuda if available, else cpu), cpu, cuda, tpu")
    p.add_argument("--precision", choices=("auto", "bf16", "fp32"), default=d.precision)
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--parallel", choices=("ddp", "fsdp"), default=d.parallel, help="with several ranks")
    p.add_argument("--num-workers", type=int, default=d.num_workers, help="loader processes per rank")
    p.add_argument("--save-every", type=int, default=d.save_every)
    p.add_argument("--keep-last", type=int, default=d.keep_last)
    p.add_argument("--log-every", type=int, default=d.log_every)
    p.add_argument("--eval-every", type=int, default=d.eval_every, help="0 = evaluate at the end only")
    p.add_argument("--eval-batches", type=int, default=d.eval_batches)
    p.add_argument("--max-bad-steps", type=int, default=d.max_bad_steps)
    p.add_argument("--max-minutes", type=float, default=None, help="stop (with a checkpoint) after this long")
    # Testing hook (hidden): make the loss NaN at these steps (comma-separated, 0-based).
    p.add_argument("--inject-nan-steps", default="", help=argparse.SUPPRESS)


def _micro_batch(text: str) -> int | str:
    if text == "auto":
        return text
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number or auto, not {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number or auto, not {text!r}")
    return value


def _parse_value(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def pretrain_config(args: argparse.Namespace):
    from model.trainer import TrainConfig

    overrides = {}
    for item in args.set:
        if "=" not in item:
            raise UserError(f"--set expects FIELD=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        overrides[k.strip()] = _parse_value(v)
    try:
        nan_steps = tuple(int(x) for x in args.inject_nan_steps.split(",") if x.strip())
    except ValueError as err:
        raise UserError(f"bad testing option: {err}") from err
    return TrainConfig(
        instances=args.instances,
        out=args.out,
        model=args.config,
        vocab=args.vocab,
        init_checkpoint=args.init_checkpoint,
        output_bias_init=args.output_bias_init,
        model_overrides=overrides,
        steps=args.steps,
        batch_size=args.batch_size,
        micro_batch_size=args.micro_batch_size,
        optimizer=args.optimizer,
        lr=args.lr,
        warmup_steps=args.warmup_steps,
        weight_decay=args.weight_decay,
        clip_norm=args.clip_norm,
        seed=args.seed,
        shuffle_window=args.shuffle_window,
        device=args.device,
        precision=args.precision,
        compile=args.compile,
        parallel=args.parallel,
        num_workers=args.num_workers,
        save_every=args.save_every,
        keep_last=args.keep_last,
        log_every=args.log_every,
        eval_every=args.eval_every,
        eval_batches=args.eval_batches,
        max_bad_steps=args.max_bad_steps,
        max_minutes=args.max_minutes,
        inject_nan_steps=nan_steps,
        force=args.force,
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    command = parser.prog.split()[-1]
    parser.set_defaults(_command=command)
    if command == "pretrain":
        _pretrain_arguments(parser)
    elif command == "evaluate":
        from model.evaluate import add_arguments as evaluate_arguments

        evaluate_arguments(parser)
    elif command == "finetune":
        from model.finetune import add_arguments as finetune_arguments

        finetune_arguments(parser)
    else:  # pragma: no cover - only reachable through a wrong COMMANDS entry
        raise ValueError(f"model.train_commands does not implement {command!r}")


def run(args: argparse.Namespace) -> int:
    if args._command == "pretrain":
        from model.trainer import train

        summary = train(pretrain_config(args))
        if summary is not None:
            ev = summary.get("eval") or {}
            extra = (
                f", eval MLM acc {ev['masked_lm_accuracy']:.4f} SOP acc {ev['sentence_order_accuracy']:.4f}"
                if ev
                else ""
            )
            print(
                f"pretrain: step {summary['step']} ({summary['stop']}), {summary['skipped_steps']} skipped, "
                f"{summary['train_seconds']:.0f} s{extra} -> {summary['checkpoint']}"
            )
        return 0
    if args._command == "evaluate":
        from model.evaluate import run as evaluate_run

        return evaluate_run(args)
    if args._command == "finetune":
        from model.finetune import run as finetune_run

        return finetune_run(args)
    print(f"unknown command {args._command}", file=sys.stderr)
    return 2

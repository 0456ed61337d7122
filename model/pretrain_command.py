"""`albert pretrain`: train ALBERT (MLM + SOP) on instances; rerun the same command to resume.

    albert pretrain --instances DIR --config tiny|base|...|FILE.json --out runs/ID [options]

Its options are TrainConfig's fields (model/train_config.py), from which the parser is generated.
Several processes: `torchrun --nproc_per_node N -m flows.cli pretrain ...` (DDP; --parallel fsdp).
"""

from __future__ import annotations

import argparse

from core import config_cli
from core.errors import UserError
from model.train_config import TrainConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    config_cli.add_arguments(parser, TrainConfig)


def run(args: argparse.Namespace) -> int:
    from model.trainer import train

    if not args.out.strip():
        raise UserError("--out is empty; give the run folder (rerun the same command to resume)")
    summary = train(config_cli.from_args(TrainConfig, args))
    if summary is not None:  # the main rank
        evaluation = summary.get("eval") or {}
        extra = (
            f", eval MLM acc {evaluation['masked_lm_accuracy']:.4f} SOP acc {evaluation['sentence_order_accuracy']:.4f}"
            if evaluation
            else ""
        )
        print(
            f"pretrain: step {summary['step']} ({summary['stop']}), {summary['skipped_steps']} skipped, "
            f"{summary['train_seconds']:.0f} s{extra} -> {summary['checkpoint']}"
        )
    return 0

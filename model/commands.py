"""`albert export` and `albert import`: checkpoint interchange on the command line.

flows/cli.py registers both names against this module; `add_arguments` sees which one it is building
from the parser's prog ("albert export" / "albert import") and `run` dispatches on it.

    albert export --checkpoint DIR --format hf|tf --out DIR [--force] [--eval REPORT.json ...]
    albert import --tf-checkpoint PREFIX --config albert_config.json --out DIR [--spm-model FILE] [--force]

Both read and verify their input completely before they touch --out, which must be new, empty or an
earlier output of the same command (pipelines.outdir; --force takes another folder over). An export
never writes into, inside or around the checkpoint it reads.
"""

from __future__ import annotations

import argparse

from pipelines.core.errors import UserError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    command = parser.prog.split()[-1]
    parser.set_defaults(_command=command)
    if command == "export":
        parser.add_argument(
            "--checkpoint", required=True, help="checkpoint folder, or a run folder (its newest checkpoint)"
        )
        parser.add_argument(
            "--format",
            required=True,
            choices=("hf", "tf"),
            help="hf: a transformers AlbertForPreTraining folder; tf: an original-layout TF checkpoint",
        )
        parser.add_argument("--out", required=True, help="output folder (new, empty or an earlier export)")
        parser.add_argument("--force", action="store_true", help="write into a non-empty --out folder")
        parser.add_argument(
            "--eval",
            action="append",
            default=[],
            metavar="REPORT",
            help="an `albert evaluate --out` or `albert finetune --out` report whose metrics go into the "
            "model card (hf only; repeatable)",
        )
    elif command == "import":
        parser.add_argument(
            "--tf-checkpoint",
            required=True,
            help="TF checkpoint prefix (e.g. model.ckpt-125000) or its folder",
        )
        parser.add_argument(
            "--config",
            required=True,
            help="albert_config.json of the checkpoint (or a transformers config.json)",
        )
        parser.add_argument(
            "--out", required=True, help="output checkpoint folder (new, empty or an earlier import)"
        )
        parser.add_argument(
            "--spm-model",
            default=None,
            help="SentencePiece model to copy in as spm.model (must have vocab_size pieces)",
        )
        parser.add_argument("--force", action="store_true", help="write into a non-empty --out folder")
    else:  # pragma: no cover - only reachable through a wrong COMMANDS entry
        raise ValueError(f"model.commands does not implement {command!r}")


def run(args: argparse.Namespace) -> int:
    if args._command == "export":
        from model.checkpoint import resolve

        args.checkpoint = resolve(args.checkpoint)
        if args.format == "hf":
            from model.convert import export_hf

            out = export_hf(args.checkpoint, args.out, args.force, args.eval)
        else:
            if args.eval:
                raise UserError("--eval goes with --format hf (the model card of a transformers export)")
            from model.convert_tf import export_tf

            out = export_tf(args.checkpoint, args.out, args.force)
        print(f"exported {args.checkpoint} as {args.format} to {out}")
        return 0
    if args._command == "import":
        from model.convert_tf import import_tf_checkpoint

        out = import_tf_checkpoint(args.tf_checkpoint, args.config, args.out, args.spm_model, args.force)
        print(f"imported {args.tf_checkpoint} to {out}")
        return 0
    raise UserError(f"unknown command {args._command!r}")

"""`albert export`: a checkpoint folder as a transformers folder (hf) or an original TF checkpoint.

    albert export --checkpoint DIR --format hf|tf --out DIR [--force] [--eval REPORT.json ...]

A fine-tuned classifier's checkpoint (model.convert.save_pretrained with its labels) exports to hf
as that transformers class with num_labels, id2label and label2id; --format tf refuses it.

It reads and verifies the checkpoint completely before it touches --out, which must be new, empty or
an earlier export (core.outdir; --force takes another folder over). An export never writes into,
inside or around the checkpoint it reads.
"""

from __future__ import annotations

import argparse

from core.errors import UserError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--checkpoint", required=True, help="checkpoint folder, or a run folder (its newest checkpoint)"
    )
    parser.add_argument(
        "--format",
        required=True,
        choices=("hf", "tf"),
        help="hf: a transformers folder of the checkpoint's class (AlbertForPreTraining, or a fine-tuned "
        "AlbertForSequenceClassification / AlbertForTokenClassification with its labels); tf: an "
        "original-layout TF checkpoint (pretraining checkpoints only)",
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


def run(args: argparse.Namespace) -> int:
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

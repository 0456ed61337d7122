"""`albert import`: an original TF checkpoint + its albert_config.json as a checkpoint folder.

    albert import --tf-checkpoint PREFIX --config albert_config.json --out DIR [--spm-model FILE] [--force]

It reads and verifies its inputs completely before it touches --out, which must be new, empty or an
earlier import (core.outdir; --force takes another folder over).
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
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


def run(args: argparse.Namespace) -> int:
    from model.convert_tf import import_tf_checkpoint

    out = import_tf_checkpoint(args.tf_checkpoint, args.config, args.out, args.spm_model, args.force)
    print(f"imported {args.tf_checkpoint} to {out}")
    return 0

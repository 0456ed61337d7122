"""`albert tokenize`: the project's own tokenization of text lines, for users and for parity checks.

    albert tokenize --vocab DIR        < lines.txt > ids.txt
    albert tokenize --checkpoint DIR   [--pieces] < lines.txt      (a checkpoint, or a run folder)

Reads lines on stdin and prints, for each line, the space-separated ids (or, with --pieces, the
pieces) that pretraining and fine-tuning give that text: the vocabulary's normalization, then
SentencePiece, through the same `Tokenizer.encode` the instance stage and `albert finetune` use. No
special tokens are added. An empty line (or one that normalizes to nothing) prints an empty line, so
output line k always belongs to input line k.

The vocabulary is `spm.model` in --vocab (checked against the sha256 in the folder's manifest, as
every stage does) or in --checkpoint (checked against the checkpoint's checksums.json, or a registry
version's lineage.json; a run folder gives its newest checkpoint's). Lines are read as UTF-8; undecodable bytes become U+FFFD, which the
compiled normalization removes.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import logging
import sys

from core import run_folders, storage
from core.errors import UserError
from core.tokenizer import Tokenizer

SPM = "spm.model"
BATCH_LINES = 4096  # lines normalized per SentencePiece call (one call per line costs ~3x more)

_log = logging.getLogger(__name__)


def add_arguments(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--vocab", help="a vocabulary folder from `albert vocab` (or an spm.model file)")
    src.add_argument(
        "--checkpoint",
        help="a checkpoint folder (or registry version) holding spm.model, or a run folder (its newest checkpoint)",
    )
    p.add_argument("--pieces", action="store_true", help="print pieces instead of ids")


def load_checkpoint_vocab(folder: str) -> Tokenizer:
    """The checkpoint's spm.model, verified against the sha256 its folder records. A run folder
    means its newest checkpoint, as for every command that takes one; a newer checkpoint whose
    vocabulary does not verify is skipped for an older one, as model.checkpoint.latest skips it."""
    if not storage.isdir(folder):
        raise UserError(f"--checkpoint {folder}: no such folder")
    if not run_folders.is_run_folder(folder):
        return _verified_vocab(folder)
    steps = run_folders.list_steps(folder)
    if not steps:
        raise UserError(f"--checkpoint {folder} is a run folder without a complete checkpoint yet")
    first_error = None
    for step in reversed(steps):
        try:
            return _verified_vocab(run_folders.step_dir(folder, step))
        except UserError as err:
            _log.warning("skipping checkpoint: %s", err)
            first_error = first_error or err
    raise first_error


def _verified_vocab(folder: str) -> Tokenizer:
    path = storage.join(folder, SPM)
    if not storage.isfile(path):
        raise UserError(
            f"{path} not found: this checkpoint has no vocabulary (export it from a run of `albert pretrain`)"
        )
    data = storage.read_bytes(path)
    for table in ("checksums.json", "lineage.json"):
        table_path = storage.join(folder, table)
        if storage.exists(table_path):
            try:
                expected = storage.read_json(table_path)["files"].get(SPM)
            except (ValueError, KeyError, TypeError, AttributeError):
                raise UserError(f"{table_path} is damaged, so {path} cannot be verified") from None
            if expected and hashlib.sha256(data).hexdigest() != expected:
                raise UserError(
                    f"{path} does not match its sha256 in {table_path}: the file is corrupt or was "
                    f"changed; copy the checkpoint again"
                )
            break
    try:
        return Tokenizer(data)
    except RuntimeError:
        raise UserError(f"{path} is not a SentencePiece model (corrupt or truncated)") from None
    except ValueError as err:
        raise UserError(f"{path}: {err}") from None


def tokenize_lines(tok: Tokenizer, lines: list[str], pieces: bool = False) -> list[str]:
    """One output line per input line: ids (or pieces) separated by single spaces."""
    normalized = tok.normalizer.many([line.rstrip("\r\n") for line in lines])
    out = []
    for text in normalized:
        ids = tok.encode_document("line", [text], "none").ids.tolist() if text.strip() else []
        out.append(" ".join(tok.pieces[i] for i in ids) if pieces else " ".join(map(str, ids)))
    return out


def run(args: argparse.Namespace) -> int:
    tok = Tokenizer.load(args.vocab) if args.vocab else load_checkpoint_vocab(args.checkpoint)
    stdin = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace", newline="\n")
    batch: list[str] = []
    for line in stdin:
        batch.append(line)
        if len(batch) == BATCH_LINES:
            sys.stdout.write("".join(x + "\n" for x in tokenize_lines(tok, batch, args.pieces)))
            batch = []
    if batch:
        sys.stdout.write("".join(x + "\n" for x in tokenize_lines(tok, batch, args.pieces)))
    sys.stdout.flush()
    return 0

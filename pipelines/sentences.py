"""Sentence splitting for Chinese and Latin text (pure functions, no Beam).

Chinese sentences end at 。！？；… (and their ASCII forms); closing quotes and brackets that follow the
terminator stay with the sentence (“……。”). Latin sentences end at . ! ? followed by white space, except
after a few common abbreviations and single initials. Overlong sentences are split at commas, then at a
hard character limit, so no sentence exceeds `max_chars`.
"""

from __future__ import annotations

import re

# Terminators, then any run of closing quotes/brackets that belongs to the same sentence.
_ZH_END = r"[。！？；!?;…]+"
_CLOSERS = "”’」』）)】》\"'"
_ZH_SPLIT = re.compile(rf"({_ZH_END}[{re.escape(_CLOSERS)}]*)")
# A Latin full stop ends a sentence only when white space follows.
_LATIN_END = re.compile(r"(?<=[.!?])([\"')\]]*)\s+(?=[\"'(\[]?[A-Z0-9\u4e00-\u9fff])")
_ABBREVIATIONS = {
    "mr",
    "mrs",
    "ms",
    "dr",
    "prof",
    "st",
    "vs",
    "etc",
    "e.g",
    "i.e",
    "no",
    "fig",
    "jr",
    "sr",
    "inc",
}
_SOFT_BREAKS = re.compile(r"(?<=[，,、：:])")
_WS = re.compile(r"\s+")

DEFAULT_MAX_CHARS = 256


def _split_latin(text: str) -> list[str]:
    out, start = [], 0
    for m in _LATIN_END.finditer(text):
        end = m.start(1) + len(m.group(1))
        head = text[start:end]
        last_word = head.rstrip(".!?\"')]").rsplit(" ", 1)[-1].lower()
        if head.endswith(".") and (
            last_word in _ABBREVIATIONS or (len(last_word) == 1 and last_word.isalpha())
        ):
            continue
        out.append(head)
        start = m.end()
    out.append(text[start:])
    return out


def _split_long(sentence: str, max_chars: int) -> list[str]:
    """Split an overlong sentence at commas (greedy fill), then hard-cut what is still too long."""
    if len(sentence) <= max_chars:
        return [sentence]
    out, cur = [], ""
    for part in _SOFT_BREAKS.split(sentence):
        if cur and len(cur) + len(part) > max_chars:
            out.append(cur)
            cur = ""
        cur += part
    out.append(cur)
    result = []
    for piece in out:
        result.extend(piece[i : i + max_chars] for i in range(0, len(piece), max_chars))
    return result


def split_sentences(text: str, max_chars: int = DEFAULT_MAX_CHARS) -> list[str]:
    """Split one paragraph into sentences. White space is normalized; empty pieces are dropped."""
    text = _WS.sub(" ", text).strip()
    if not text:
        return []
    pieces = _ZH_SPLIT.split(text)
    # re.split with a capture group alternates [body, terminator, body, terminator, ..., tail]
    zh = [pieces[i] + (pieces[i + 1] if i + 1 < len(pieces) else "") for i in range(0, len(pieces), 2)]
    sentences = []
    for chunk in zh:
        # a Latin sentence end needs . ! or ?: most Chinese sentences have none (no regex to run)
        latin = "." in chunk or "!" in chunk or "?" in chunk
        for s in _split_latin(chunk) if latin else (chunk,):
            s = s.strip()
            if s:
                sentences.extend(_split_long(s, max_chars))
    return sentences


def split_paragraphs(paragraphs: list[str], max_chars: int = DEFAULT_MAX_CHARS) -> list[str]:
    """The sentences of several paragraphs (a document's lines), in order."""
    return [s for paragraph in paragraphs for s in split_sentences(paragraph, max_chars)]

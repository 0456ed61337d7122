"""SOP chunk plans: dense chunks of whole sentences, A|B only between consecutive sentences of one
document."""

from __future__ import annotations

import numpy as np
import pytest

from pipelines.packing import PackingConfig, assemble, plan_chunks

CLS, SEP = 2, 3


def random_stream(rng, docs=30, longest=199):
    lengths, doc_of = [], []
    for d in range(docs):
        for _ in range(rng.integers(1, 8)):
            lengths.append(int(rng.integers(1, longest + 1)))
            doc_of.append(d)
    starts = np.concatenate(([0], np.cumsum(lengths)))
    return starts, np.array(doc_of)


@pytest.mark.parametrize("seed", range(5))
def test_cut_is_between_consecutive_sentences_of_one_document(seed):
    rng = np.random.default_rng(seed)
    starts, doc_of = random_stream(rng, longest=62)  # no sentence longer than half a sequence: no pieces
    plan = plan_chunks(starts, doc_of, rng, PackingConfig(max_seq_length=128))
    sentence_at = {int(s): k for k, s in enumerate(starts[:-1])}
    for a, c, e in zip(plan.start, plan.cut, plan.end):
        assert a < c < e
        k = sentence_at[int(c)]  # the cut is a sentence start...
        assert k > 0 and doc_of[k] == doc_of[k - 1]  # ...and the previous sentence is the same document
        assert e - a <= 128 - 3


def test_chunks_tile_the_stream_and_count_every_token():
    rng = np.random.default_rng(0)
    starts, doc_of = random_stream(rng, docs=200, longest=126)  # no pieces
    cfg = PackingConfig(max_seq_length=256)
    max_tokens = cfg.max_seq_length - 3
    plan = plan_chunks(starts, doc_of, np.random.default_rng(1), cfg)
    kept = int((plan.end - plan.start).sum())
    assert kept + plan.tokens_dropped_no_boundary == starts[-1], "every token is kept or counted as dropped"
    assert np.all(plan.start[1:] >= plan.end[:-1])  # in stream order, never overlapping
    sentence = {int(s): k for k, s in enumerate(starts)}
    lengths = np.diff(starts)
    full = 0
    for a, e in zip(plan.start.tolist(), plan.end.tolist()):
        assert a in sentence and e in sentence  # both edges are sentence boundaries
        nxt = sentence[e]
        if nxt < len(lengths) and (e - a) + lengths[nxt] > max_tokens:
            full += 1  # the next sentence did not fit: the chunk is as full as whole sentences allow
    assert full / len(plan.start) > 0.8  # the others are short targets (10%) and the group's end
    assert kept / (len(plan.start) * max_tokens) > 0.6  # sentences of 1-126 tokens in 253
    assert 0.35 < plan.label.mean() < 0.65


def test_sentences_longer_than_a_sequence_are_cut_into_pieces_that_pack():
    # one document: 10, 300 (longer than a sequence of 61), 10 tokens
    starts = np.array([0, 10, 310, 320])
    plan = plan_chunks(starts, np.zeros(3, dtype=int), np.random.default_rng(0), PackingConfig(64))
    assert plan.sentences_split == 1 and plan.tokens_dropped_no_boundary == 0
    assert int((plan.end - plan.start).sum()) == 320
    pieces = [10 + k * 300 // 10 for k in range(11)]  # pieces of at most 61 // 2: 10 of 30
    for a, c, e in zip(plan.start.tolist(), plan.cut.tolist(), plan.end.tolist()):
        assert {a, c, e} <= set([0, 320] + pieces) and e - a <= 61
    assert len(plan.start) >= 5  # pieces pair up: each chunk has an A|B place


def test_one_sentence_documents_never_give_a_boundary():
    starts = np.arange(0, 21 * 10, 10)  # 20 sentences of 10 tokens, each its own document
    plan = plan_chunks(starts, np.arange(20), np.random.default_rng(0), PackingConfig(max_seq_length=64))
    assert len(plan.start) == 0 and plan.tokens_dropped_no_boundary == 200


def test_short_targets_follow_short_seq_prob():
    starts = np.arange(0, 200_001, 50)
    doc = np.zeros(len(starts) - 1, dtype=int)
    plan = plan_chunks(
        starts, doc, np.random.default_rng(0), PackingConfig(max_seq_length=128, short_seq_prob=0.1)
    )
    n = len(plan.start)
    assert abs(plan.short_targets / n - 0.1) < 5 * np.sqrt(0.1 * 0.9 / n)


def test_assemble_layout_and_swap():
    ids = np.arange(100, 200, dtype=np.int32)
    ws = np.zeros(100, dtype=bool)
    starts = np.array([0, 10, 25, 40])
    plan = plan_chunks(
        starts, np.zeros(3, dtype=int), np.random.default_rng(3), PackingConfig(max_seq_length=64)
    )
    plan.label[:] = [1]  # force a swap to check the layout
    b = assemble(plan, ids, ws, 64, CLS, SEP)
    a_len, b_len = int(plan.cut[0] - plan.start[0]), int(plan.end[0] - plan.cut[0])
    row = b.tokens[0]
    assert row[0] == CLS and row[b_len + 1] == SEP and row[a_len + b_len + 2] == SEP
    assert np.array_equal(row[1 : b_len + 1], ids[plan.cut[0] : plan.end[0]])  # B first when swapped
    assert np.array_equal(row[b_len + 2 : b_len + 2 + a_len], ids[plan.start[0] : plan.cut[0]])
    assert np.all(row[a_len + b_len + 3 :] == 0)
    assert b.segment_ids[0, : b_len + 2].sum() == 0 and b.segment_ids[0, b_len + 2 : a_len + b_len + 3].all()
    assert b.word_start[0, [0, 1, b_len + 1, b_len + 2, a_len + b_len + 2]].all()
    assert not b.candidate[0, [0, b_len + 1, a_len + b_len + 2]].any()


def test_no_sentence_sits_alone_without_an_a_b_place():
    # one document of alternating 40- and 100-token sentences at L=128 (125 tokens): 100 + 40 does not
    # fit, so whole sentences would leave every 100-token sentence alone; halves of 50 always pair
    lengths = [40, 100] * 50
    starts = np.concatenate(([0], np.cumsum(lengths)))
    plan = plan_chunks(starts, np.zeros(100, dtype=int), np.random.default_rng(0), PackingConfig(128))
    assert plan.sentences_split == 50 and plan.tokens_dropped_no_boundary == 0
    assert int((plan.end - plan.start).sum()) == starts[-1]

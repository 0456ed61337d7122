"""Vocabulary conventions: ALBERT's special pieces, character-level CJK, deterministic training."""

from __future__ import annotations

import pytest

from pipelines.vocab import VocabConfig, train_vocab


def test_albert_conventions(tokenizer):
    sp = tokenizer.sp
    assert sp.pad_id() == 0 and sp.unk_id() == 1 and sp.bos_id() == -1 and sp.eos_id() == -1
    assert [sp.id_to_piece(i) for i in (2, 3, 4)] == ["[CLS]", "[SEP]", "[MASK]"]
    assert all(sp.is_control(i) for i in (2, 3, 4))
    pool = set(tokenizer.ordinary_ids.tolist())
    assert not pool & {0, 1, 2, 3, 4}, "random replacements never draw control pieces"


def test_cjk_is_character_level_and_latin_keeps_subwords(tokenizer):
    pieces = tokenizer.sp.encode("中华人民共和国成立了", out_type=str)
    assert all(len(p) == 1 for p in pieces)
    latin = tokenizer.sp.encode("the quick brown fox", out_type=str)
    assert any(len(p.lstrip("▁")) > 1 for p in latin)


def test_training_is_deterministic(sample_docs):
    sentences = [s for d in sample_docs[:60] for s in d["sentences"]]
    cfg = VocabConfig(vocab_size=2500, sample_sentences=500, seed=7)
    a, _ = train_vocab(iter(sentences), cfg)
    b, _ = train_vocab(iter(sentences), cfg)
    assert a == b
    c, _ = train_vocab(iter(sentences), VocabConfig(vocab_size=2500, sample_sentences=500, seed=8))
    assert c != a  # another reservoir sample


def test_too_small_vocabulary_is_a_clear_error(sample_docs):
    from core.errors import UserError

    sentences = [s for d in sample_docs[:60] for s in d["sentences"]]
    with pytest.raises(UserError, match="--vocab-size"):
        train_vocab(iter(sentences), VocabConfig(vocab_size=200, split_cjk=False))


def test_compiled_vocabulary_has_no_commuting_pieces(tokenizer):
    """No two pieces are powers of one string ("1" and "11"): such pieces make exact score ties,
    which SentencePiece and transformers break differently."""
    from pipelines.vocab import _primitive_root

    roots = {}
    for i, p in enumerate(tokenizer.pieces):
        if not (tokenizer.sp.is_control(i) or tokenizer.sp.is_unknown(i)):
            root, _ = _primitive_root(p)
            assert root not in roots, (p, tokenizer.pieces[roots[root]])
            roots[root] = i

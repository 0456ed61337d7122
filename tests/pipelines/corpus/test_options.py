"""CorpusOptions: its flat dict (the manifest's `config.options`) and the corpus stage key it feeds
are pinned, so that grouping the options into sections changes neither."""

from __future__ import annotations

import json

from flows.build_corpus import corpus_key
from pipelines.corpus.options import CorpusOptions

# CorpusOptions().to_dict() as the manifest stores it (json.dumps keeps the order of the fields).
DEFAULT_OPTIONS = (
    '{"max_record_bytes": 67108864, "wiki_streams_per_range": 20, "jsonl_range_bytes": 67108864, '
    '"opencc": "t2s", "min_chars": 50, "max_chars": 1000000, "min_cjk_ratio": 0.3, '
    '"min_terminal_ratio": 0.3, "max_dup_line_ratio": 0.3, "max_dup_line_char_ratio": 0.2, '
    '"max_top_ngram_ratio": [[2, 0.3], [3, 0.28], [4, 0.26]], '
    '"max_dup_ngram_ratio": [[5, 0.8], [6, 0.78], [7, 0.76], [8, 0.74], [9, 0.72], [10, 0.7]], '
    '"max_top_word_ngram_ratio": [[2, 0.2], [3, 0.18], [4, 0.16]], '
    '"max_dup_word_ngram_ratio": [[5, 0.15], [6, 0.14], [7, 0.13], [8, 0.12], [9, 0.11], [10, 0.1]], '
    '"line_min_chars": 5, "boilerplate_min_docs": 3, "shingle_chars": 5, "shingle_words": 3, '
    '"minhash_bands": 20, "minhash_rows": 5, "near_dup_threshold": 0.7, "minhash_seed": 1, '
    '"max_bucket_pairs": 64, "cc_rounds": 2, "min_survivor_similarity": 0.6, "max_sentence_chars": 256, '
    '"shard_chars": 64000000, "shards": 0, "rejected_shard_records": 200000}'
)


def test_default_options_dict_is_pinned():
    assert json.dumps(CorpusOptions().to_dict()) == DEFAULT_OPTIONS


def test_corpus_stage_key_of_the_bundled_sample_is_pinned():
    """Today's keys (computed before the options were grouped): a change here orphans every corpus
    folder already built, and every downstream stage keyed on it."""
    assert corpus_key.fn(["peoples-daily:"], {})[0] == "90b361284be32ed4"
    overrides = {"min_chars": 100, "opencc": "off", "minhash_bands": 10}
    assert corpus_key.fn(["peoples-daily:"], overrides)[0] == "99d00759d0f22f94"

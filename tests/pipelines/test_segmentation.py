"""The Chinese word segmenter against the sample's gold segmentation."""

from __future__ import annotations


def test_jieba_agrees_with_gold_mostly(sample_docs):
    from pipelines.segmentation import boundary_agreement

    scores = boundary_agreement(sample_docs[:150])
    print(f"\njieba vs gold word boundaries on the sample: {scores}")
    assert scores["boundary_f1"] > 0.85 and scores["word_f1"] > 0.7

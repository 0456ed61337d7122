"""The normalization rules compiled into spm.model."""

from __future__ import annotations

from tests.pipelines.fixtures import MIXED


def test_normalization_table_is_closed_and_matches_what_sentencepiece_compiled(tokenizer, sample_docs):
    """The table's output never changes again, and the Python reading of it (used on training text
    before a model exists) equals SentencePiece's normalization by the compiled model."""
    from pipelines.vocab_normalization import apply_rules, char_rules, check_closed

    assert check_closed() == []
    rules = char_rules()
    assert rules["們"] == "们" and rules["１"] == "1" and rules["\u3000"] == " " and rules["\u200b"] == ""
    assert "乾" not in rules and "於" not in rules  # correct simplified characters too: left alone
    lines = [s for d in sample_docs for s in d["sentences"]] + MIXED + ["``a'' \t b\u00a0c 後來 ①"]
    for line in lines:
        assert " " + apply_rules(line) == tokenizer.normalizer.one(line) or not apply_rules(line), line

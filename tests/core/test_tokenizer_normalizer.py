"""The Python normalization rules of the older identity vocabularies."""

from __future__ import annotations

from core.tokenizer_normalizer import nfkc, normalize_many
from tests.pipelines.fixtures import MIXED


def test_nfkc_matches_unicodedata():
    import unicodedata

    for text in MIXED + ["ｅ\u0301 한글 ＡＢ１２，。", "①㍿ 𝐀𝐁 \U0002f800", "e\u0301"]:
        assert nfkc(text) == unicodedata.normalize("NFKC", text)
    assert normalize_many(["  a\tb ", "ＡＢ", "x\ny"]) == ["a b", "AB", "x y"]

"""Raw text -> the normalized text the tokenizer segments, as the vocabulary prescribes
(`TextNormalizer`), and the Python rules of the older identity vocabularies (`normalize`).

- Vocabularies with compiled rules (`albert vocab`'s default, see pipelines.vocab_normalization): the text
  is normalized by SentencePiece itself with the model's own table, so the ids are exactly
  `sentencepiece.encode(raw text)`, which is also what transformers' AlbertTokenizer gives. The
  normalized text keeps SentencePiece's dummy prefix as a leading space (its "▁" piece).
- Older identity vocabularies: `normalize` below, in Python (NFKC, controls removed, white space
  folded), as they were trained.

`identity_model` is the model that segments such normalized text exactly as the full model
segments the raw text (core.tokenizer cuts pieces with it).
"""

from __future__ import annotations

import functools
import re
import unicodedata

_WS = re.compile(r"\s+")
# C0/C1 control characters except the white space that _WS folds; U+FFFD marks undecodable bytes.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ufeff\u200b-\u200f\u202a-\u202e\ufffd]")


def is_cjk_char(ch: str) -> bool:
    o = ord(ch)
    return (
        0x4E00 <= o <= 0x9FFF  # CJK Unified Ideographs
        or 0x3400 <= o <= 0x4DBF  # Extension A
        or 0x20000 <= o <= 0x2FA1F  # Extensions B-F and compatibility supplement
        or 0xF900 <= o <= 0xFAFF  # compatibility ideographs
    )


@functools.cache
def _nfkc_table() -> tuple[re.Pattern, dict[str, str]]:
    """Every BMP code point whose NFKC form differs from itself, and a regex that finds them (beyond
    the BMP, `nfkc`'s final check catches the rest: a large non-BMP class would make the regex slow)."""
    table = {}
    for cp in range(0x10000):
        if 0xD800 <= cp < 0xE000:
            continue
        ch = chr(cp)
        norm = unicodedata.normalize("NFKC", ch)
        if norm != ch:
            table[ch] = norm
    return re.compile("[" + "".join(re.escape(c) for c in table) + "]"), table


def nfkc(text: str) -> str:
    """unicodedata.normalize("NFKC", text), ~3x faster on Chinese text: the code points that change
    are replaced from a table (a regex finds them), then the rare text that is still not NFKC (combining
    sequences, Hangul) gets the full algorithm, which yields NFKC(text) since NFKC(NFKC(c)...) = NFKC."""
    pattern, table = _nfkc_table()
    out = pattern.sub(lambda m: table[m.group()], text)
    return out if unicodedata.is_normalized("NFKC", out) else unicodedata.normalize("NFKC", out)


def normalize(text: str) -> str:
    """NFKC (full-width letters/digits/punctuation to ASCII), control characters removed, white space
    folded to single spaces. Applied identically before training the vocabulary and before encoding."""
    text = nfkc(text)
    text = _CONTROL.sub("", text)
    return _WS.sub(" ", text).strip()


_WS_NOT_NEWLINE = re.compile(r"[^\S\n]+")


def normalize_many(texts: list[str]) -> list[str]:
    """`normalize` applied to each text, in a few calls over the joined texts (much faster on many
    short sentences). Newlines inside a text count as white space."""
    joined = "\n".join(t.replace("\n", " ") if "\n" in t else t for t in texts)
    joined = _CONTROL.sub("", nfkc(joined))
    joined = _WS_NOT_NEWLINE.sub(" ", joined)
    out = [t.strip() for t in joined.split("\n")]
    if len(out) != len(texts):  # NFKC produced a newline (it does not for any current code point)
        return [normalize(t) for t in texts]
    return out


def count_bad_chars(text: str) -> tuple[int, int]:
    """(undecodable-byte replacement characters, other control characters) in raw text."""
    bad = _CONTROL.findall(text)
    replacement = sum(1 for c in bad if c == "\ufffd")
    return replacement, len(bad) - replacement


class TextNormalizer:
    """Raw text -> the normalized text that the tokenizer segments, as the vocabulary prescribes.

    `compiled` when the model carries its own normalization table (any normalizer but identity):
    SentencePiece normalizes, "▁" becomes " " again, and the dummy prefix stays as a leading space.
    Otherwise the Python rules of `normalize` (the vocabularies made before rules were compiled)."""

    def __init__(self, model_proto: bytes, sp=None):
        import sentencepiece as spm
        from sentencepiece import sentencepiece_model_pb2 as pb

        spec = pb.ModelProto.FromString(model_proto).normalizer_spec
        self.compiled = spec.name != "identity"
        self.dummy_prefix = self.compiled and spec.add_dummy_prefix
        # `sp`: a processor of the same model already loaded (the Tokenizer's), not loaded twice.
        self._sp = (sp or spm.SentencePieceProcessor(model_proto=model_proto)) if self.compiled else None

    def many(self, texts: list[str]) -> list[str]:
        if not self.compiled:
            return normalize_many(texts)
        return [t.replace("▁", " ") for t in self._sp.normalize(texts)]

    def one(self, text: str) -> str:
        return self.many([text])[0]

    def word(self, text: str) -> str:
        """A word of a gold segmentation: normalized, without white space or dummy prefix."""
        return (self.one(text) if self.compiled else normalize(text)).replace(" ", "")


def identity_model(model_proto: bytes) -> bytes:
    """The model with an identity normalizer (no table, no dummy prefix, spaces kept as they are, each
    space still written "▁"): it segments already-normalized text exactly as the full model segments
    the raw text, because SentencePiece normalizes first and segments the normalized string."""
    from sentencepiece import sentencepiece_model_pb2 as pb

    model = pb.ModelProto.FromString(model_proto)
    spec = model.normalizer_spec
    spec.name = "identity"
    spec.precompiled_charsmap = b""
    spec.add_dummy_prefix = False
    spec.remove_extra_whitespaces = False
    spec.escape_whitespaces = True
    model.ClearField("denormalizer_spec")
    return model.SerializeToString()

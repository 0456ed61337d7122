"""Text normalization rules: each a small named pure function, composed by `normalize_text`.

Order matters: entities are unescaped first (they may encode control characters), control and
private-use characters go before NFKC (private-use code points are used here as placeholders),
traditional -> simplified runs on NFKC output, white space is tidied last.
"""

from __future__ import annotations

import html
import itertools
import re
import unicodedata
from functools import lru_cache

# Characters NFKC would fold but Chinese text wants as they are: full-width comma and sentence
# punctuation (NFKC turns "，！？；：（）" into ASCII) and the ellipsis (NFKC turns "…" into "...").
_PROTECTED = set("，！？；：（）…")

# Categories removed outright: controls (Cc) except line breaks and tabs, format characters (Cf:
# zero-width spaces, BOM, soft hyphen, bidi marks), private use (Co), lone surrogates (Cs).
_KEEP_CONTROLS = {"\n", "\t", "\r"}
_REMOVED_CATEGORIES = {"Cc", "Cf", "Co", "Cs"}


def _char_class(codepoints: list[int]) -> str:
    """A regex character class for a sorted list of code points, as ranges."""
    parts, start, prev = [], None, None
    for cp in codepoints:
        if start is None:
            start = prev = cp
        elif cp == prev + 1:
            prev = cp
        else:
            parts.append((start, prev))
            start = prev = cp
    if start is not None:
        parts.append((start, prev))
    return "".join(
        re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in parts
    )


@lru_cache(maxsize=1)
def _removable() -> re.Pattern:
    # Scan the planes that have assigned controls/format characters; the supplementary private-use
    # planes 15 and 16 are private use throughout (no need to look up 130k code points one by one).
    scanned = itertools.chain(range(0x30000), range(0xE0000, 0xE1000))
    cps = [
        cp
        for cp in scanned
        if unicodedata.category(chr(cp)) in _REMOVED_CATEGORIES and chr(cp) not in _KEEP_CONTROLS
    ]
    cps += list(range(0xF0000, 0xFFFFE)) + list(range(0x100000, 0x10FFFE))
    return re.compile(f"[{_char_class(cps)}]+")


_PROTECTED_RUN = re.compile(f"([{''.join(sorted(_PROTECTED))}]+)")
_LINE_BREAKS = re.compile(r"\r\n?|[\u2028\u2029]")


def unescape_html(text: str) -> str:
    """`&amp;`, `&nbsp;`, `&#x4e2d;` ... -> characters (twice-escaped text like `&amp;lt;` once only)."""
    return html.unescape(text) if "&" in text else text


def remove_control_chars(text: str) -> str:
    """Drop control, format, private-use and surrogate characters; tabs become spaces, CR and the
    Unicode line/paragraph separators become newlines."""
    text = _removable().sub("", text)
    if "\t" in text:
        text = text.replace("\t", " ")
    return _LINE_BREAKS.sub("\n", text)


def nfkc_keep_cjk_punct(text: str) -> str:
    """NFKC (full-width letters/digits -> ASCII, compatibility forms such as ① or ﬁ unfolded), except
    for the full-width Chinese punctuation and the ellipsis, which stay as they are."""
    if text.isascii():
        return text
    # Split around the protected punctuation and normalize the pieces between: as fast as
    # translating to placeholders and back, and no placeholder can collide with the input.
    parts = _PROTECTED_RUN.split(text)
    parts[::2] = [unicodedata.normalize("NFKC", p) for p in parts[::2]]
    return "".join(parts)


class ChineseConverter:
    """Traditional -> simplified with OpenCC; the converter is built lazily once per process."""

    def __init__(self, config: str = "t2s"):
        self.config = config
        self._cc = None

    def __call__(self, text: str) -> str:
        if self.config == "off" or text.isascii():
            return text
        if self._cc is None:
            import opencc  # compiled C++ OpenCC

            self._cc = opencc.OpenCC(self.config)
        return self._cc.convert(text)

    def __getstate__(self):  # the OpenCC object does not pickle: rebuild it on the worker
        return {"config": self.config, "_cc": None}


_CJK = r"\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff01-\uff0f\uff1a-\uff20"
_SPACES = re.compile(r"[ \u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]+")
_SPACE_BETWEEN_CJK = re.compile(rf"(?<=[{_CJK}]) (?=[{_CJK}])")
_BLANK_LINES = re.compile(r"\n\s*\n+")


def normalize_whitespace(text: str) -> str:
    """Runs of (Unicode) spaces -> one space; spaces between two CJK characters removed (they are
    typesetting, not word breaks); lines stripped; runs of blank lines -> one blank line."""
    text = _SPACES.sub(" ", text)
    text = _SPACE_BETWEEN_CJK.sub("", text)
    text = "\n".join(line.strip() for line in text.split("\n"))
    return _BLANK_LINES.sub("\n\n", text).strip()


def normalize_text(text: str, convert: ChineseConverter | None = None) -> str:
    """All rules in order. `convert` is a ChineseConverter (None = no traditional -> simplified)."""
    text = unescape_html(text)
    text = remove_control_chars(text)
    text = nfkc_keep_cjk_punct(text)
    if convert is not None:
        text = convert(text)
    return normalize_whitespace(text)

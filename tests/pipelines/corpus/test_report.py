"""The corpus report (pipelines/corpus/report.py): report.html and its markdown summary from stats.json,
the examples per drop reason, and the page opened in a real headless browser (docs/corpus-report.md)."""

from __future__ import annotations

import gzip
import json
import random
import re
import subprocess
import tracemalloc
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from pipelines.corpus import report
from pipelines.corpus.report_svg import WIDTH
from tests.cdp import chromium_path

SECTIONS = (
    "sources",
    "drops",
    "lengths",
    "languages",
    "pii",
    "decontamination",
    "near-duplicates",
    "lines",
    "examples",
    "accounting",
)
SVG = "{http://www.w3.org/2000/svg}"


def old_stats() -> dict:
    """A stats.json as accounting.stats_from_counts writes it before the report's keys."""
    dropped = {"held_out_eval": 466, "too_short": 51, "no_terminal_punct": 48, "near_duplicate": 5}
    dead = {"malformed_json": 2}
    return {
        "read": 3225,
        "kept": 2653,
        "dropped": dropped,
        "dead_letter": dead,
        "by_source": {
            "peoples-daily": {"read": 3200, "kept": 2630, "dropped": dropped, "dead_letter": {}},
            "news2016zh": {"read": 25, "kept": 23, "dropped": {}, "dead_letter": dead},
        },
        "lines_removed": {"photo_credit": 361, "sign_off": 24},
        "files": {},
        "other": {},
        "dropped_total": 570,
        "dead_letter_total": 2,
        "lost": {"records": 0, "estimated": 0, "bytes": 0},
        "invariant": {
            "rule": "read = kept + dropped_total + dead_letter_total",
            "read": 3225,
            "accounted": 3225,
            "holds": True,
        },
        "index_invariant": {
            "rule": "pages listed = pages read + pages lost",
            "holds": True,
            "mismatches": {},
        },
    }


def full_stats() -> dict:
    stats = old_stats()
    stats["chars"] = {
        "read": {"peoples-daily": 2_000_000, "news2016zh": 9_000},
        "kept": {"peoples-daily": 1_600_000, "news2016zh": 8_000},
    }
    stats["length_hist"] = {
        "before": {"16": 40, "32": 60, "512": 2000, "1024": 1100, "2048": 25},
        "after": {"512": 1700, "1024": 940, "2048": 13},
    }
    stats["languages"] = {"zh": 3150, "ja": 4, "en": 2}
    stats["pii"] = {"phone": 37, "email": 5}
    stats["pii_mode"] = "redact"
    stats["decontamination"] = {
        "sets": [{"name": "review:test", "kind": "task", "sha256": "ab" * 32, "examples": 1000, "n": 13}],
        "mode": "sentence",
        "documents": 3,
        "sentences": 17,
    }
    stats["near_dup_clusters"] = {"2": 4, "3": 1}
    return stats


def rec(rid: str, reason: str, excerpt: str = "正文。", dead_letter: bool = False) -> dict:
    return {
        "id": rid,
        "source": rid.split(":")[0],
        "reason": reason,
        "dead_letter": dead_letter,
        "stage": "filter",
        "detail": "",
        "where": "",
        "title": "",
        "excerpt": excerpt,
    }


def section(html: str, anchor: str) -> str:
    match = re.search(rf'<section id="{anchor}">(.*?)</section>', html, re.S)
    assert match, f"no section {anchor}"
    return match.group(1)


def svg_rects(fragment: str) -> list[ET.Element]:
    """The bars of the first chart in `fragment` (the SVG is well-formed XML on its own)."""
    svg = re.search(r"<svg .*?</svg>", fragment, re.S).group(0)
    return list(ET.fromstring(svg).iter(f"{SVG}rect"))


# --- the pure functions -----------------------------------------------------------------------------------


def test_excerpts_and_names_are_escaped():
    stats = full_stats()
    stats["dropped"]["<img src=x>"] = 1
    evil = rec("peoples-daily:a:1", "too_short", excerpt="<script>alert('x')</script>&")
    evil["title"] = "<b>title</b>"
    html = report.render_html(stats, {"too_short": [evil], "<img src=x>": []}, "<title>")
    assert "<script" not in html and "<img" not in html and "<b>title" not in html
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;&amp;" in html
    assert "&lt;img src=x&gt;" in html


def test_every_section_is_drawn_when_its_stats_are_there():
    html = report.render_html(full_stats(), {"too_short": [rec("peoples-daily:a:1", "too_short")]}, "t")
    assert 'class="absent"' not in html
    for anchor in SECTIONS:
        body = section(html, anchor)
        assert body.strip()
        assert f'href="#{anchor}"' in html
    for anchor in ("sources", "drops", "lengths", "languages", "pii", "near-duplicates", "lines"):
        assert svg_rects(section(html, anchor)), anchor
    assert "review:test" in section(html, "decontamination") and "17 sentences" in section(
        html, "decontamination"
    )
    assert "holds" in section(html, "accounting")
    lengths = section(html, "lengths")
    assert "<title>before cleaning, 1,024–2,047 characters: 1,100 documents</title>" in lengths
    assert "3,225 documents, the median one of 512–1,023 characters" in lengths


def test_sections_an_old_stats_json_lacks_are_noted_not_drawn():
    html = report.render_html(old_stats(), {}, "t")
    for anchor in ("lengths", "languages", "pii", "decontamination", "near-duplicates"):
        body = section(html, anchor)
        assert 'class="absent"' in body and "<svg" not in body, anchor
    assert "characters per source" in section(html, "sources")  # the note; the document counts stay
    assert svg_rects(section(html, "drops"))
    md = report.render_markdown(old_stats())
    assert (
        "Language mix**: not in this stats.json" in md and "Decontamination**: not in this stats.json" in md
    )


def test_the_same_stats_give_the_same_bytes_whatever_the_dict_order():
    stats, examples = full_stats(), {"too_short": [rec("peoples-daily:a:1", "too_short")]}
    shuffled = json.loads(json.dumps(stats))
    for key in ("dropped", "languages", "pii", "near_dup_clusters", "lines_removed", "by_source"):
        shuffled[key] = dict(reversed(list(shuffled[key].items())))
    first = report.render_html(stats, examples, "t")
    assert report.render_html(shuffled, examples, "t") == first
    assert report.render_markdown(shuffled) == report.render_markdown(stats)


def test_bar_lengths_are_proportional_to_the_counts():
    stats = full_stats()
    rects = svg_rects(section(report.render_html(stats, {}, "t"), "drops"))
    counts = sorted([*stats["dropped"].values(), *stats["dead_letter"].values()], reverse=True)
    widths = [float(r.get("width")) for r in rects]
    assert len(widths) == len(counts)
    assert widths[0] == WIDTH  # the largest count fills the chart
    for width, count in zip(widths, counts):
        assert width == pytest.approx(WIDTH * count / counts[0], abs=0.05)
    titles = [r.find(f"{SVG}title").text for r in rects]
    assert titles[0] == "held_out_eval: dropped 466"
    assert {r.get("class") for r in rects} == {"dropped", "dead"}


def test_examples_are_the_smallest_ids_in_natural_order_whatever_the_input_order():
    records = [rec(f"news2016zh:f:{i}", "too_short" if i % 2 else "near_duplicate") for i in range(1, 500)]
    random.Random(0).shuffle(records)
    chosen = report.examples_by_reason(records, per_reason=3)
    assert [r["id"] for r in chosen["too_short"]] == ["news2016zh:f:1", "news2016zh:f:3", "news2016zh:f:5"]
    assert [r["id"] for r in chosen["near_duplicate"]] == [
        "news2016zh:f:2",
        "news2016zh:f:4",
        "news2016zh:f:6",
    ]
    assert list(chosen) == ["near_duplicate", "too_short"]


def test_examples_by_reason_streams_in_bounded_memory():
    """20,000 records of 20 KB each (400 MB if held) stream through in a few hundred KB."""

    def records():
        for i in range(20_000, 0, -1):  # descending ids: each one is a new smallest
            yield rec(f"zhwiki:d:{i}", ("redirect", "too_short")[i % 2], excerpt="字" * 10_000)

    tracemalloc.start()
    try:
        chosen = report.examples_by_reason(records(), per_reason=2)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2_000_000
    assert [r["id"] for r in chosen["redirect"]] == ["zhwiki:d:2", "zhwiki:d:4"]


def test_markdown_is_short_link_free_and_holds_the_figures():
    md = report.render_markdown(full_stats())
    assert "](" not in md and "http" not in md
    assert "| read | 3,225 |" in md and "| kept | 2,653 | 82.3% | 1,608,000 |" in md
    assert md.index("held_out_eval") < md.index("too_short")  # largest first
    assert "| zh | 3,150 |" in md and "| phone | 37 |" in md and "mode redact" in md
    assert "3 documents, 17 sentences removed" in md and "5 clusters of 11 documents" in md
    assert "**holds**" in md and len(md.splitlines()) < 60


def test_write_report_reads_the_rejected_shards(tmp_path):
    with gzip.open(tmp_path / "rejected-00000-of-00001.jsonl.gz", "wt", encoding="utf-8") as f:
        for i in (12, 3, 7, 40):
            f.write(json.dumps(rec(f"peoples-daily:a:{i}", "too_short", excerpt=f"第{i}篇。")) + "\n")
    path = report.write_report(str(tmp_path), full_stats(), "sample")
    html = open(path, encoding="utf-8").read()
    assert path.endswith("report.html")
    examples = section(html, "examples")
    assert examples.index("peoples-daily:a:3") < examples.index("peoples-daily:a:7") < examples.index("a:12")
    assert "peoples-daily:a:40" not in examples


# --- in a real browser ---------------------------------------------------------------------------------------


def run_chromium(browser: str, profile: str, *args: str) -> str:
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
    ]
    done = subprocess.run([browser, *flags, *args], capture_output=True, text=True, timeout=120, check=True)
    return done.stdout


def test_report_renders_with_its_charts_in_headless_chromium(tmp_path):
    browser = chromium_path()
    html = report.render_html(full_stats(), {"too_short": [rec("peoples-daily:a:1", "too_short")]}, "t")
    page = tmp_path / "report.html"
    page.write_text(html, encoding="utf-8")
    url = page.as_uri()

    dom = run_chromium(browser, str(tmp_path / "profile"), "--dump-dom", url)
    assert dom.count("<svg") == 7  # sources, drops, lengths, languages, pii, near duplicates, lines
    assert len(re.findall(r"<rect ", section(dom, "drops"))) == 5
    assert "<title>held_out_eval: dropped 466</title>" in dom
    assert len(re.findall(r"<rect ", section(dom, "lengths"))) == 8  # 5 buckets before, 3 after

    shot = tmp_path / "report.png"
    run_chromium(browser, str(tmp_path / "profile"), f"--screenshot={shot}", "--window-size=1200,3000", url)
    from PIL import Image  # a dependency of matplotlib

    pixels = np.asarray(Image.open(shot).convert("RGB")).astype(int)
    assert pixels.shape[:2] == (3000, 1200)

    def near(rgb: tuple[int, int, int]) -> int:
        return int((np.abs(pixels - np.array(rgb)).sum(axis=2) < 30).sum())

    # the bars are painted in their colours: the largest drop bar alone is 560 x 16 px of orange
    assert near((0xDD, 0x6B, 0x20)) > 560 * 16  # .dropped
    assert near((0x31, 0x82, 0xCE)) > 560 * 16  # .kept: the languages' and the sources' bars
    assert near((0x80, 0x5A, 0xD5)) > 560 * 16  # .pii
    assert (pixels.sum(axis=2) < 3 * 250).mean() > 0.02  # not a blank page


def test_the_accounting_reads_as_a_sum_of_the_figures_shown():
    stats = {"read": 1000, "kept": 953, "dropped_total": 43, "dead_letter_total": 4}
    assert report.accounting_sum(stats) == (
        "kept 953 + dropped 43 + dead letters 4 = 1,000 = read 1,000: **holds**"
    )
    assert report.accounting_sum({**stats, "read": 1001}).endswith("= 1,000 ≠ read 1,001: **BROKEN**")
    assert f"Accounting: {report.accounting_sum(full_stats())}." in report.render_markdown(full_stats())

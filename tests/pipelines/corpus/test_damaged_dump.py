"""`albert corpus` over a damaged zhwiki dump, as the user runs it (a subprocess, tests/cli.py): what the
damage lost counts against --max-dead-letter-fraction page by page, stats.json and the summary line
name it per file, and an index that does not belong to the dump fails the accounting."""

from __future__ import annotations

import bz2
import json
import os
import shutil

import pytest

from pipelines.corpus import sources
from pipelines.corpus.dumps import damage_stream, flip_bytes
from pipelines.corpus.options import CorpusOptions
from tests.cli import albert
from tests.pipelines.corpus.fixtures import NAME, PAGES, stream_ids, write_wiki

BEAM = ("--direct_running_mode", "in_memory", "--direct_num_workers", "1")


@pytest.fixture(scope="module")
def damaged(tmp_path_factory, wiki_articles):
    folder = tmp_path_factory.mktemp("damaged")
    dump = write_wiki(str(folder), wiki_articles)
    start, end = damage_stream(dump, 5)  # 40 bytes inverted in the middle of the dump
    return {"dump": dump, "bytes": end - start}


def test_damaged_dump_fails_over_the_limit_naming_what_was_lost(tmp_path, damaged):
    out = tmp_path / "out"
    r = albert("corpus", "--source", f"zhwiki:{damaged['dump']}", "--out", str(out), *BEAM)
    line = r.fails(
        1,
        f"50 of {PAGES} records (10.0%) went to the dead letter",
        "commonest corrupt_input (50)",
        f"damaged input lost {NAME}: 50 records, {damaged['bytes']} bytes",
    )
    assert "--max-dead-letter-fraction" in line
    stats = json.load(open(out / "stats.json"))
    lost = stats["files"][NAME]["lost"]
    assert lost == {
        "records": 50,
        "estimated": 0,
        "bytes": damaged["bytes"],
        "rest_unknown": 0,
        "ids": stream_ids(5),
    }
    assert stats["files"][NAME]["listed"] == stats["files"][NAME]["read"] == PAGES == stats["read"]
    assert stats["index_invariant"]["holds"] and stats["invariant"]["holds"]
    assert stats["lost"] == {"records": 50, "estimated": 0, "bytes": damaged["bytes"]}
    assert not os.path.exists(out / "manifest.json")


@pytest.mark.slow
def test_damaged_dump_under_the_limit_is_published_and_says_what_was_lost(tmp_path, damaged):
    out = tmp_path / "out"
    r = albert("corpus", "--source", f"zhwiki:{damaged['dump']}", "--out", str(out), *BEAM,
               "--max-dead-letter-fraction", "0.2").ok()  # fmt: skip
    summary = json.loads(r.out.strip().splitlines()[-1])
    assert summary["read"] == PAGES and summary["dead_letter"] == 50
    assert summary["lost"] == {NAME: {"records": 50, "bytes": damaged["bytes"]}}
    manifest = json.load(open(out / "manifest.json"))
    assert manifest["counts"]["lost"] == summary["lost"]


def test_an_index_of_another_dump_fails_the_accounting(tmp_path, wiki_articles):
    dump = write_wiki(str(tmp_path), wiki_articles)
    index = dump.replace("multistream", "multistream-index").replace(".xml", ".txt")
    lines = bz2.decompress(open(index, "rb").read()).decode().splitlines()
    first = lines[0].split(":")[0]
    lines.insert(1, f"{first}:999999:不在这个转储里的页面")  # a page this dump does not hold
    open(index, "wb").write(bz2.compress(("\n".join(lines) + "\n").encode()))
    out = tmp_path / "out"
    r = albert("corpus", "--source", f"zhwiki:{dump}", "--out", str(out), *BEAM)
    r.fails(
        1, "corpus accounting failed", f"the index of {NAME} lists {PAGES + 1} pages, the dump held {PAGES}"
    )


def _index_of(dump: str) -> str:
    return dump.replace("multistream", "multistream-index").replace(".xml", ".txt")


def test_an_index_of_a_dump_of_other_pages_is_not_used_and_a_line_says_why(tmp_path, wiki_articles):
    """An index of another dump (other pages: other stream offsets) beside this one. Used, its ranges
    started inside streams and the dead letters named pages that were in fact read; now it is not
    used, with a warning, and the dump is read whole."""
    dump = write_wiki(str(tmp_path), wiki_articles)
    other = write_wiki(str(tmp_path / "other"), [{**a, "title": a["title"] * 3} for a in wiki_articles])
    shutil.copy(_index_of(other), _index_of(dump))
    out = tmp_path / "out"
    r = albert("corpus", "--source", f"zhwiki:{dump}", "--out", str(out), *BEAM).ok()
    (warning,) = [line for line in r.err.splitlines() if line.startswith("warning:")]
    assert f"the multistream index {_index_of(dump)} is not used for {dump}" in warning
    assert "it is not this dump's index" in warning and "read in one piece, by one worker" in warning
    stats = json.load(open(out / "stats.json"))
    assert stats["read"] == PAGES and stats["dead_letter_total"] == 0 and stats["invariant"]["holds"]


def test_a_damaged_index_is_not_used_and_a_line_says_why(tmp_path, wiki_articles):
    dump = write_wiki(str(tmp_path), wiki_articles)
    index = _index_of(dump)
    data = open(index, "rb").read()
    open(index, "wb").write(data[: len(data) // 2])  # cut: bz2 ends early
    out = tmp_path / "out"
    r = albert("corpus", "--source", f"zhwiki:{dump}", "--out", str(out), *BEAM).ok()
    (warning,) = [line for line in r.err.splitlines() if line.startswith("warning:")]
    assert "is not used" in warning and "it cannot be read (EOFError" in warning
    stats = json.load(open(out / "stats.json"))
    assert stats["read"] == PAGES and stats["dead_letter_total"] == 0


def test_a_damaged_jsonl_counts_against_the_limit_by_what_it_lost(tmp_path, wiki_articles):
    """One dead letter stands for the records the damage lost (an estimate): the stage counts it that
    many times in `read` and the dead letter, and the files agree."""
    path = tmp_path / "news.json.bz2"
    lines = [
        json.dumps({"news_id": f"n{i}", "title": a["title"], "content": "\n".join(a["sentences"])}, ensure_ascii=False)
        for i, a in enumerate(wiki_articles)
    ]  # fmt: skip
    path.write_bytes(bz2.compress(("\n".join(lines) + "\n").encode(), 1))
    flip_bytes(str(path), path.stat().st_size // 2)
    records = list(sources.read_work(sources.plan_sources([f"news2016zh:{path}"])[0], CorpusOptions()))
    (dead,) = [r for r in records if "lost" in r]
    # (bz2 may hand out some garbage before it notices the damage: lines that do not parse)
    others = [r for r in records if "error" in r and "lost" not in r]
    n, read = dead["lost"]["records"], len(records) - 1 + dead["lost"]["records"]
    assert n > 100 and dead["lost"]["estimated"]
    out = tmp_path / "out"
    r = albert("corpus", "--source", f"news2016zh:{path}", "--out", str(out), *BEAM)
    r.fails(
        1,
        f"{n + len(others)} of {read} records",
        f"damaged input lost news2016zh:news.json.bz2: {n} (estimated) records",
    )
    stats = json.load(open(out / "stats.json"))
    assert stats["read"] == read and stats["dead_letter"]["corrupt_input"] == n
    assert stats["dead_letter_total"] == n + len(others)
    assert stats["invariant"]["holds"] and stats["lost"]["estimated"] == n

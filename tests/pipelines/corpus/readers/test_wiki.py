"""The zhwiki reader: page fields, damaged dumps, oversized and undecodable pages, a real dump."""

from __future__ import annotations

import bz2
import os
import shutil

import pytest

from pipelines.corpus import sources
from tests.pipelines.corpus.fixtures import OPTS, _pages, _read_all, page_xml, write_dump


def test_wiki_page_fields_and_dump_format(tmp_path):
    dump = str(tmp_path / "zhwiki-1-pages-articles.xml.bz2")
    write_dump(
        dump,
        [
            page_xml(7, "北京", "'''北京'''是首都。", ns=0),
            page_xml(8, "重定向", "#重定向 [[北京]]", redirect="北京"),
            page_xml(9, "Talk:北京", "讨论", ns=1),
        ],
    )
    recs = _read_all(sources.plan_sources([f"zhwiki:{dump}"]))
    assert [(r["id"], r["ns"], r["redirect"]) for r in recs] == [
        ("zhwiki:zhwiki-1-pages-articles.xml.bz2:7", 0, False),
        ("zhwiki:zhwiki-1-pages-articles.xml.bz2:8", 0, True),
        ("zhwiki:zhwiki-1-pages-articles.xml.bz2:9", 1, False),
    ]
    assert recs[0]["text"] == "'''北京'''是首都。" and recs[0]["title"] == "北京"
    assert recs[0]["url"] == "https://zh.wikipedia.org/wiki?curid=7"
    assert recs[0]["markup"] == "wiki"


def test_truncated_bz2_keeps_what_was_read_and_dead_letters_the_rest(tmp_path):
    # concatenated bz2 streams (5 pages each) and no index: one worker reads the file
    dump = str(tmp_path / "zhwiki-1-pages-articles-multistream.xml.bz2")
    os.remove(write_dump(dump, _pages(40), multistream=True, per_stream=5))
    data = open(dump, "rb").read()
    with open(dump, "wb") as f:
        f.write(data[: len(data) * 2 // 3])
    recs = _read_all(sources.plan_sources([f"zhwiki:{dump}"]))
    good, bad = [r for r in recs if "error" not in r], [r for r in recs if "error" in r]
    assert len(good) > 0 and len(bad) == 1 and bad[0]["error"] == "truncated_input"


def test_oversized_page_skipped_without_buffering(tmp_path):
    dump = str(tmp_path / "zhwiki-1-pages-articles.xml.bz2")
    write_dump(
        dump,
        [
            page_xml(1, "小", "小页面。"),
            page_xml(2, "大", "大" * 300_000),
            page_xml(3, "小二", "又一个小页面。"),
        ],
    )
    recs = _read_all(sources.plan_sources([f"zhwiki:{dump}"]), OPTS.replace(max_record_bytes=100_000))
    name = "zhwiki:zhwiki-1-pages-articles.xml.bz2"
    assert [r.get("id") or r["error"] for r in recs] == [f"{name}:1", "record_too_large", f"{name}:3"]


def test_invalid_utf8_page_is_a_dead_letter(tmp_path):
    dump = str(tmp_path / "zhwiki-1-pages-articles.xml.bz2")
    xml = (page_xml(1, "好", "正文。") + page_xml(2, "坏", "BAD") + page_xml(3, "好二", "正文。")).encode()
    from tests.pipelines.corpus.fixtures import FOOTER, HEADER

    with open(dump, "wb") as f:
        f.write(bz2.compress(HEADER.encode() + xml.replace(b"BAD", b"\xff\xfe") + FOOTER.encode()))
    recs = _read_all(sources.plan_sources([f"zhwiki:{dump}"]))
    name = "zhwiki:zhwiki-1-pages-articles.xml.bz2"
    assert [r.get("id") or r["error"] for r in recs] == [f"{name}:1", "invalid_utf8", f"{name}:3"]


GENSIM_EXCERPT = "gensim/test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"


def _gensim_excerpt(tmp_path):
    """The excerpt from an installed gensim, from $ENWIKI_EXCERPT, or from the gensim wheel fetched
    with `pip download` (nothing installed: only that one file is unpacked)."""
    import importlib.util
    import subprocess
    import sys
    import zipfile

    spec = importlib.util.find_spec("gensim")
    if spec and spec.submodule_search_locations:
        path = os.path.join(os.path.dirname(spec.submodule_search_locations[0]), GENSIM_EXCERPT)
        if os.path.exists(path):
            return path
    if os.environ.get("ENWIKI_EXCERPT"):
        return os.environ["ENWIKI_EXCERPT"]
    wheels = tmp_path / "wheels"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--only-binary",
            ":all:",
            "--dest",
            str(wheels),
            "gensim==4.4.0",
        ],
        capture_output=True,
        timeout=300,
    )
    found = list(wheels.glob("gensim-4.4.0-*.whl")) if done.returncode == 0 else []
    if not found:
        return None
    with zipfile.ZipFile(found[0]) as zf:
        zf.extract(GENSIM_EXCERPT, tmp_path / "gensim")
    return str(tmp_path / "gensim" / GENSIM_EXCERPT)


@pytest.mark.slow
def test_reader_on_the_real_enwiki_excerpt_gensim_ships(tmp_path):
    """The real MediaWiki export format (gensim's shortened enwiki dump): every page is read."""
    path = _gensim_excerpt(tmp_path)
    if not path:
        pytest.skip("the gensim wheel could not be fetched (no registry) and ENWIKI_EXCERPT is not set")
    local = str(tmp_path / "enwiki-latest-pages-articles1.xml.bz2")
    shutil.copy(path, local)
    recs = _read_all(sources.plan_sources([f"zhwiki:{local}"]))
    raw = bz2.open(local).read()
    assert len(recs) == raw.count(b"<page>") == 206
    assert not [r for r in recs if "error" in r]
    assert (
        recs[0]["redirect"]
        and recs[1]["title"] == "Anarchism"
        and recs[1]["id"] == "zhwiki:enwiki-latest-pages-articles1.xml.bz2:12"
    )
    assert sum(r["ns"] != 0 for r in recs) == 1
    # and through the whole pipeline: real wikitext cleans without a dead letter, every page accounted
    import json

    from flows.cli import main

    out = str(tmp_path / "corpus")
    # English text: the language filter keeps English here (its default, zh, would drop every article)
    argv = ["corpus", "--source", f"zhwiki:{local}", "--out", out, "--min-cjk-ratio", "0", "--opencc", "off", "--languages", "en"]  # fmt: skip
    assert main([*argv, "--direct_running_mode", "in_memory"]) == 0
    stats = json.load(open(os.path.join(out, "stats.json")))
    assert stats["read"] == 206 and stats["invariant"]["holds"] and stats["dead_letter_total"] == 0
    assert stats["dropped"]["redirect"] == sum(r["ns"] == 0 and r["redirect"] for r in recs) == 99
    # one short English page is under the language filter's confidence; every other article is kept
    assert stats["kept"] > 90 and stats["dropped"].get("wrong_language", 0) <= 1, stats["dropped"]

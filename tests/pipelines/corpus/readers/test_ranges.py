"""Byte ranges: multistream dumps and JSON lines split into ranges that read every record once."""

from __future__ import annotations

import os

from pipelines.corpus import sources
from tests.pipelines.corpus.fixtures import OPTS, _pages, _read_all, write_dump, write_jsonl


def test_multistream_split_into_ranges_reads_every_page_once(tmp_path):
    dump = str(tmp_path / "zhwiki-20261101-pages-articles-multistream.xml.bz2")
    index = write_dump(dump, _pages(450), multistream=True)
    assert index == sources.wiki_index_name(dump) and os.path.exists(index)
    (item,) = sources.plan_sources([f"zhwiki:{dump}"])
    assert item["index"] == index  # found beside the dump
    opts = OPTS.replace(wiki_streams_per_range=2)
    ranges = list(sources.split_work(item, opts))
    assert len(ranges) == 3  # 5 streams of <= 100 pages, 2 per range
    assert ranges[0]["start"] > 0 and ranges[-1]["end"] == os.path.getsize(dump)
    assert all(a["end"] == b["start"] for a, b in zip(ranges, ranges[1:]))
    ids = [r["id"] for part in ranges for r in sources.read_work(part, opts)]
    assert ids == [f"zhwiki:zhwiki-20261101-pages-articles-multistream.xml.bz2:{i}" for i in range(1, 451)]
    # the same pages as reading the file in one piece
    whole = [r["id"] for r in sources.read_work({**item, "index": None}, opts)]
    assert whole == ids


def test_unreadable_index_falls_back_to_whole_file(tmp_path):
    dump = str(tmp_path / "zhwiki-1-pages-articles-multistream.xml.bz2")
    index = write_dump(dump, _pages(3), multistream=True)
    with open(index, "wb") as f:
        f.write(b"not bz2")
    (item,) = sources.plan_sources([f"zhwiki:{dump}"])
    (part,) = sources.split_work(item, OPTS)
    assert part["index"] is None and "index_error" in part
    assert len(list(sources.read_work(part, OPTS))) == 3


def test_jsonl_byte_ranges_read_every_line_exactly_once(tmp_path):
    path = str(tmp_path / "news.json")
    records = [{"news_id": f"n{i}", "title": f"标题{i}", "content": "内容" * (i % 7 + 1)} for i in range(300)]
    write_jsonl(path, records)
    for step in (1, 7, 100, 1000, 10**9):
        recs = _read_all(sources.plan_sources([f"news2016zh:{path}"]), OPTS.replace(jsonl_range_bytes=step))
        assert [r["id"] for r in recs] == [f"news2016zh:news.json:n{i}" for i in range(300)], step


def test_jsonl_files_are_cut_into_enough_ranges():
    """Records are cleaned where they are read: a file must make enough ranges to keep every worker
    busy, never ranges under 1 MiB, never over --jsonl-range-bytes."""
    from pipelines.corpus.readers.ranges import MIN_RANGE_BYTES, MIN_RANGES, jsonl_step

    mib = 1 << 20
    assert jsonl_step(52 * mib, 64 * mib) == MIN_RANGE_BYTES  # the 16x scale corpus: 52 ranges
    assert jsonl_step(2_000 * mib, 64 * mib) == -(-2_000 * mib // MIN_RANGES)  # 64 ranges
    assert jsonl_step(100_000 * mib, 64 * mib) == 64 * mib  # the cap
    assert jsonl_step(5000, 7) == 7  # an explicit small range size wins

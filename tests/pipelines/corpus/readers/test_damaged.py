"""Damaged compressed input, damaged byte by byte as real dumps arrive (a bad disk, a cut download):
a damaged bz2 stream loses its own pages and no more; what is lost is counted, by id where the
multistream index names the pages, else estimated from the bytes; a cut or damaged .gz/.bz2 counts
its unread rest."""

from __future__ import annotations

import bz2
import gzip
import json
import os

import pytest

from pipelines.corpus import sources
from pipelines.corpus.dumps import (
    FOOTER,
    HEADER,
    article_wikitext,
    cut,
    damage_stream,
    flip_bytes,
    page_xml,
    stream_offsets,
)
from pipelines.corpus.readers import bz2streams, wiki
from tests.pipelines.corpus.fixtures import (
    ALL_IDS,
    NAME,
    OPTS,
    PAGES,
    PER_STREAM,
    stream_ids,
    write_wiki,
)


def read(dump, index=True, opts=OPTS) -> tuple[list[dict], list[dict], list[dict]]:
    """(pages read, dead letters of lost records, other error records)."""
    (item,) = sources.plan_sources([f"zhwiki:{dump}"])
    if not index:
        item = {**item, "index": None}
    recs = [r for part in sources.split_work(item, opts) for r in sources.read_work(part, opts)]
    return (
        [r for r in recs if "error" not in r],
        [r for r in recs if "lost" in r],
        [r for r in recs if "error" in r and "lost" not in r],
    )


@pytest.mark.parametrize("streams_per_range", [20, 1])
@pytest.mark.parametrize("stream", [1, 5, 10])  # the start, the middle, the end of the dump
def test_damaged_stream_with_index_loses_exactly_its_pages(
    tmp_path, wiki_articles, stream, streams_per_range
):
    dump = write_wiki(str(tmp_path), wiki_articles)
    start, end = damage_stream(dump, stream)  # 40 bytes inverted in the middle of the stream
    pages, lost, other = read(dump, opts=OPTS.replace(wiki_streams_per_range=streams_per_range))
    lost_ids = stream_ids(stream)
    assert [r["id"] for r in pages] == [i for i in ALL_IDS if i not in lost_ids]
    assert [r["id"] for r in lost] == lost_ids and not other
    assert [r["title"] for r in lost] == [a["title"] for a in wiki_articles[(stream - 1) * 50 : stream * 50]]
    assert {r["error"] for r in lost} == {"corrupt_input"}
    assert all(r["lost"]["records"] == 1 and not r["lost"]["estimated"] for r in lost)
    assert all(r["lost"]["file"] == NAME for r in lost)
    assert sum(r["lost"]["bytes"] for r in lost) == end - start  # the damaged stream, counted once
    assert len(pages) + sum(r["lost"]["records"] for r in lost) == PAGES  # read + lost = listed


@pytest.mark.parametrize("stream", [1, 5, 10])
def test_damaged_stream_without_index_resyncs_at_the_next_stream(tmp_path, wiki_articles, stream):
    dump = write_wiki(str(tmp_path), wiki_articles)
    start, end = damage_stream(dump, stream)
    pages, lost, other = read(dump, index=False)
    assert [r["id"] for r in pages] == [i for i in ALL_IDS if i not in stream_ids(stream)]
    (dead,) = lost
    assert not other and dead["error"] == "corrupt_input" and dead["where"].endswith(f"@{start}")
    assert dead["lost"]["bytes"] == end - start and dead["lost"]["estimated"]
    assert 0.6 * PER_STREAM <= dead["lost"]["records"] <= 1.4 * PER_STREAM  # estimated from the bytes
    # the texts read are the dump's, untouched
    assert all(
        r["text"]
        == article_wikitext(r["title"], wiki_articles[int(r["id"].rsplit(":")[-1]) - 1000]["sentences"])
        for r in pages
    )


@pytest.mark.parametrize("index", [True, False])
def test_cut_dump_loses_what_follows_the_cut(tmp_path, wiki_articles, index):
    dump = write_wiki(str(tmp_path), wiki_articles)
    offsets = stream_offsets(dump)
    cut(dump, 0.55)
    size = os.path.getsize(dump)
    k = max(i for i, o in enumerate(offsets) if o < size)  # the stream the cut falls in
    pages, lost, other = read(dump, index=index)
    assert [r["id"] for r in pages] == ALL_IDS[: (k - 1) * PER_STREAM] and not other
    assert {r["error"] for r in lost} == {"truncated_input"}
    if index:  # every page after the cut is named
        assert [r["id"] for r in lost] == ALL_IDS[(k - 1) * PER_STREAM :]
        assert len(pages) + len(lost) == PAGES
        assert sum(r["lost"]["bytes"] for r in lost) == size - offsets[k]  # the file's, not the index's
    else:  # the pages the cut stream held are estimated; what followed it is not in the file
        (dead,) = lost
        assert dead["lost"]["rest_unknown"] and dead["lost"]["bytes"] == size - offsets[k]
        assert dead["lost"]["records"] >= 1


def _garbage_flip(data: bytes, original: bytes, step: int) -> int:
    """An offset in bz2 stream `data` where 40 inverted bytes make bz2 hand out a whole page of
    garbage before it fails, taken `step` bytes at a time (bz2 checks a block's CRC only after
    handing out its bytes)."""
    for at in range(200, len(data) - 100, 97):
        damaged = bytearray(data)
        for i in range(at, at + 40):
            damaged[i] ^= 0xFF
        dec, out = bz2.BZ2Decompressor(), b""
        try:
            out += dec.decompress(bytes(damaged), step)
            while not dec.eof and not dec.needs_input:
                out += dec.decompress(b"", step)
        except OSError:
            bad = next((i for i, (a, b) in enumerate(zip(out, original)) if a != b), None)
            if bad is not None and out.find(b"</page>", bad) >= 0:
                return at
    raise AssertionError("no flip that hands out garbage found")


@pytest.mark.parametrize("hold", [True, False])
def test_garbage_of_a_damaged_stream_is_never_handed_out(tmp_path, monkeypatch, wiki_articles, hold):
    """Pages are held until their stream's CRCs are checked: none of a damaged stream's bytes make a
    page, even the ones bz2 handed out before it noticed the damage (as it does for streams that
    decompress to more than one step: here the step is made small). Without the hold (False: the
    check of the test itself), garbage pages come out."""
    monkeypatch.setattr(bz2streams, "OUT", 4096)
    if not hold:
        monkeypatch.setattr(wiki, "BLOCK_OUTPUT_MAX", -1)
    dump = write_wiki(str(tmp_path), wiki_articles)
    offsets = stream_offsets(dump) + [os.path.getsize(dump)]
    data = open(dump, "rb").read()
    stream = data[offsets[3] : offsets[4]]
    flip_bytes(dump, offsets[3] + _garbage_flip(stream, bz2.decompress(stream), 4096))
    for index in (True, False):
        pages, lost, other = read(dump, index=index)
        clean = [r["id"] for r in pages] == [i for i in ALL_IDS if i not in stream_ids(3)] and not other
        assert clean == hold
        assert sum(r["lost"]["records"] for r in lost) >= 1


def test_a_page_cut_by_the_damage_is_not_glued_to_the_next_stream(tmp_path, wiki_articles):
    """Streams cut at any byte (as pbzip2 writes them, no index): pages that touch the damaged
    stream are lost, and the reader starts again at the first whole page after it."""
    xml = (HEADER + "".join(page_xml(1000 + i, f"条目{i}", article_wikitext(a["title"], a["sentences"])) for i, a in enumerate(wiki_articles[:60])) + FOOTER).encode()  # fmt: skip
    step = 20_011  # streams end inside pages
    chunks = [xml[i : i + step] for i in range(0, len(xml), step)]
    dump = str(tmp_path / "zhwiki-1-pages-wiki_articles.xml.bz2")
    open(dump, "wb").write(b"".join(bz2.compress(c) for c in chunks))
    damage_stream(dump, 2)
    lo, hi = 2 * step, 3 * step  # decompressed bytes of the damaged stream
    expected = []
    for i in range(60):
        a, b = xml.index(f"<id>{1000 + i}</id>".encode()), None
        a = xml.rindex(b"<page>", 0, a)
        b = xml.index(b"</page>", a) + len(b"</page>")
        if b <= lo or a >= hi:
            expected.append(f"zhwiki:zhwiki-1-pages-wiki_articles.xml.bz2:{1000 + i}")
    recs = [r for part in sources.split_work(sources.plan_sources([f"zhwiki:{dump}"])[0], OPTS) for r in sources.read_work(part, OPTS)]  # fmt: skip
    pages = [r for r in recs if "error" not in r]
    assert [r["id"] for r in pages] == expected
    assert [r["error"] for r in recs if "error" in r] == ["corrupt_input"]
    for r in pages:
        i = int(r["id"].rsplit(":")[-1]) - 1000
        assert r["text"] == article_wikitext(wiki_articles[i]["title"], wiki_articles[i]["sentences"])


def test_long_stream_pages_are_released_once_their_blocks_are_checked(tmp_path, monkeypatch, wiki_articles):
    """In a stream longer than a bz2 block can decompress to, pages are handed out as the stream
    goes (memory stays bounded); a damage later in it loses only what followed the pages handed out."""
    monkeypatch.setattr(wiki, "BLOCK_OUTPUT_MAX", 200_000)  # (a block of this test's size)
    xml = (HEADER + "".join(page_xml(1000 + i, f"条目{i}", article_wikitext(a["title"], a["sentences"])) for i, a in enumerate(wiki_articles)) + FOOTER).encode()  # fmt: skip
    dump = str(tmp_path / "zhwiki-1-pages-wiki_articles.xml.bz2")
    open(dump, "wb").write(bz2.compress(xml, 1))  # blocks of 100 kB: about 20 of them
    size = os.path.getsize(dump)
    flip_bytes(dump, size * 3 // 4)
    recs = [r for r in sources.read_work(sources.plan_sources([f"zhwiki:{dump}"])[0], OPTS)]
    pages, lost = [r for r in recs if "error" not in r], [r for r in recs if "lost" in r]
    assert 0.3 * PAGES < len(pages) < 0.75 * PAGES  # what preceded the damage, less one hold
    assert [r["id"] for r in pages] == [
        f"zhwiki:zhwiki-1-pages-wiki_articles.xml.bz2:{1000 + i}" for i in range(len(pages))
    ]
    (dead,) = lost
    assert dead["lost"]["estimated"] and 0 < dead["lost"]["bytes"] < size * 0.7


# --- JSON lines and text, .gz and .bz2 -----------------------------------------------------------------


def _news_lines(wiki_articles) -> list[str]:
    return [
        json.dumps({"news_id": f"n{i}", "title": a["title"], "content": "\n".join(a["sentences"])}, ensure_ascii=False)
        for i, a in enumerate(wiki_articles)
    ]  # fmt: skip


@pytest.mark.parametrize("ext", ["gz", "bz2"])
def test_cut_jsonl_counts_its_unread_rest(tmp_path, wiki_articles, ext):
    path = str(tmp_path / f"news.json.{ext}")
    data = ("\n".join(_news_lines(wiki_articles)) + "\n").encode()
    open(path, "wb").write(gzip.compress(data) if ext == "gz" else bz2.compress(data, 1))
    cut(path, 0.6)
    recs = [r for part in sources.split_work(sources.plan_sources([f"news2016zh:{path}"])[0], OPTS) for r in sources.read_work(part, OPTS)]  # fmt: skip
    read, (dead,) = [r for r in recs if "error" not in r], [r for r in recs if "lost" in r]
    assert [r["id"] for r in read] == [f"news2016zh:news.json.{ext}:n{i}" for i in range(len(read))]
    assert dead["error"] == "truncated_input" and dead["lost"]["rest_unknown"] and dead["lost"]["estimated"]
    assert dead["lost"]["records"] >= 1 and dead["lost"]["file"] == f"news2016zh:news.json.{ext}"


def test_damaged_bz2_jsonl_counts_the_records_it_lost(tmp_path, wiki_articles):
    path = str(tmp_path / "news.json.bz2")
    data = ("\n".join(_news_lines(wiki_articles)) + "\n").encode()
    open(path, "wb").write(bz2.compress(data, 1))
    size = os.path.getsize(path)
    flip_bytes(path, size // 2)
    recs = list(sources.read_work(sources.plan_sources([f"news2016zh:{path}"])[0], OPTS))
    read, (dead,) = [r for r in recs if "error" not in r], [r for r in recs if "lost" in r]
    truly_lost = PAGES - len(read)
    assert 0 < len(read) < PAGES and dead["error"] == "corrupt_input" and not dead["lost"]["rest_unknown"]
    assert 0.4 * size < dead["lost"]["bytes"] < 0.6 * size
    assert 0.6 * truly_lost <= dead["lost"]["records"] <= 1.4 * truly_lost  # counts against the limit


@pytest.mark.parametrize("ext", ["gz", "bz2"])
def test_cut_text_counts_its_unread_rest(tmp_path, wiki_articles, ext):
    path = str(tmp_path / f"corpus.txt.{ext}")
    data = "\n\n".join("\n".join(a["sentences"]) for a in wiki_articles).encode()
    open(path, "wb").write(gzip.compress(data) if ext == "gz" else bz2.compress(data, 1))
    cut(path, 0.5)
    recs = list(sources.read_work(sources.plan_sources([f"text:{path}"])[0], OPTS))
    read, (dead,) = [r for r in recs if "error" not in r], [r for r in recs if "lost" in r]
    assert 0 < len(read) < PAGES and dead["error"] == "truncated_input" and dead["lost"]["rest_unknown"]
    assert [r["text"] for r in read] == ["\n".join(a["sentences"]) for a in wiki_articles[: len(read)]]


def test_an_index_damaged_halfway_costs_parallelism_not_pages(tmp_path, wiki_articles):
    """An index that breaks off halfway: the dump is read whole, every page once (ranges planned
    from its first half would read those pages a second time)."""
    from pipelines.corpus.dumps import index_path

    dump = write_wiki(str(tmp_path), wiki_articles)
    index = index_path(dump)
    flip_bytes(index, os.path.getsize(index) * 2 // 3)
    (item,) = sources.plan_sources([f"zhwiki:{dump}"])
    parts = list(sources.split_work(item, OPTS.replace(wiki_streams_per_range=1)))
    assert len(parts) == 1 and parts[0]["index"] is None and "index_error" in parts[0]
    pages = [r for r in sources.read_work(parts[0], OPTS) if "error" not in r]
    assert [r["id"] for r in pages] == ALL_IDS

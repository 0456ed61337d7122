"""zhwiki: a MediaWiki XML dump (bz2, optionally multistream with its index) -> one raw record per
`<page>`, with its namespace and redirect flag (the cleaning step decides what to keep).

A `.bz2` dump is read stream by stream (readers/bz2streams.py): a damaged stream loses its own pages
and reading goes on at the next stream. A page is handed out only once the bz2 CRCs over it were
checked (at the end of its stream, or `BLOCK_OUTPUT_MAX` later in a stream that long): a damaged
block hands out garbage before its CRC fails, and a page of garbage must not pass for an article.

What a damage costs is said in the dead letter (readers/error_records.py `lost`). With the index, a work
item lists its streams and how many pages each holds: every page of a damaged stream that was not
handed out is one dead letter with its id and title (read from the index), and pages read + pages
lost = pages the index lists (the stage checks it per dump). Without the index the lost pages are
not known: one dead letter per damage, for the compressed bytes lost and the pages they held at the
rate of the pages read (an estimate).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from bisect import bisect_right
from collections import deque
from collections.abc import Iterator

from core import storage
from pipelines.corpus.options import CorpusOptions
from pipelines.corpus.readers.bz2streams import BLOCK_OUTPUT_MAX, iter_bz2
from pipelines.corpus.readers.error_records import (
    STREAM_ERRORS,
    error_record,
    estimate,
    lost_record,
    rest_lost,
)
from pipelines.corpus.readers.ids import native_id
from pipelines.corpus.readers.ranges import CHUNK, compression, index_pages, open_decompressed

_PAGE_OPEN, _PAGE_CLOSE = b"<page>", b"</page>"


class PageSplitter:
    """Decompressed MediaWiki XML, fed in chunks -> `<page>...</page>` byte blobs; None for a page
    over `max_bytes` (skipped without being buffered). `<` inside page text is always escaped as
    `&lt;`, so the markers cannot occur inside content. Bytes outside pages (siteinfo,
    `</mediawiki>`) are ignored."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.reset()

    def reset(self) -> None:
        """Forget a page begun: after a damage, the next page starts at the next `<page>`, and a page
        cut by the damage is not glued to the text after it."""
        self.buf, self.skipping = b"", False

    @property
    def inside_page(self) -> bool:
        return self.skipping or self.buf.find(_PAGE_OPEN) >= 0

    def feed(self, chunk: bytes) -> list[bytes | None]:
        out: list[bytes | None] = []
        buf = self.buf + chunk
        while True:
            if self.skipping:
                end = buf.find(_PAGE_CLOSE)
                if end < 0:
                    buf = buf[-len(_PAGE_CLOSE) :]
                    break
                buf, self.skipping = buf[end + len(_PAGE_CLOSE) :], False
                out.append(None)
                continue
            start = buf.find(_PAGE_OPEN)
            if start < 0:
                buf = buf[-len(_PAGE_OPEN) :]
                break
            end = buf.find(_PAGE_CLOSE, start)
            if end < 0:
                buf = buf[start:]
                if len(buf) > self.max_bytes:
                    self.skipping, buf = True, buf[-len(_PAGE_CLOSE) :]
                break
            blob, buf = buf[start : end + len(_PAGE_CLOSE)], buf[end + len(_PAGE_CLOSE) :]
            out.append(None if len(blob) > self.max_bytes else blob)
        self.buf = buf
        return out


def iter_page_blobs(stream, max_bytes: int) -> Iterator[tuple[bytes | None, int]]:
    """(blob, page) for every page (numbered from 0) of a decompressed MediaWiki XML stream
    (PageSplitter); EOFError when the stream ends inside a page."""
    splitter, page = PageSplitter(max_bytes), 0
    # read1: what is decompressed so far comes back before a truncated stream raises
    read = stream.read1 if hasattr(stream, "read1") else stream.read
    while chunk := read(CHUNK):
        for blob in splitter.feed(chunk):
            yield blob, page
            page += 1
    if splitter.inside_page:
        raise EOFError(f"stream ended inside page {page}")


def _wiki_url(path: str, page_id: str) -> str:
    m = re.match(r"([a-z_]+?)wiki-", storage.basename(path))
    return f"https://{m.group(1).replace('_', '-')}.wikipedia.org/wiki?curid={page_id}" if m else ""


def parse_page(blob: bytes) -> dict:
    """One `<page>` element -> {id, title, ns, redirect, text}. Raises UnicodeDecodeError or
    ET.ParseError for a page that cannot be read."""
    page = ET.fromstring(blob.decode("utf-8"))
    ns_text = page.findtext("ns")
    return {
        "id": (page.findtext("id") or "").strip(),
        "title": page.findtext("title") or "",
        "ns": int(ns_text) if ns_text and ns_text.strip().lstrip("-").isdigit() else 0,
        "redirect": page.find("redirect") is not None,
        "text": page.findtext("revision/text") or "",
    }


def page_record(item: dict, blob: bytes | None, where: str, max_bytes: int) -> dict:
    """A page blob -> its raw record, or the error record of a page that cannot be read."""
    if blob is None:
        return error_record(item, where, "record_too_large", f"page over {max_bytes} bytes")
    try:
        page = parse_page(blob)
    except UnicodeDecodeError as err:
        return error_record(item, where, "invalid_utf8", str(err), blob)
    except ET.ParseError as err:
        return error_record(item, where, "xml_error", str(err), blob)
    if not page["id"]:
        return error_record(item, where, "missing_field", "page without <id>", blob)
    return {
        "source": "zhwiki",
        "id": native_id(item, page["id"]),
        "title": page["title"],
        "url": _wiki_url(item["path"], page["id"]),
        "text": page["text"],
        "markup": "wiki",
        "where": where,
        "ns": page["ns"],
        "redirect": page["redirect"],
    }


def read_wiki_pages(item: dict, opts: CorpusOptions) -> Iterator[dict]:
    if compression(item["path"]) == "bz2":
        yield from _read_bz2_dump(item, opts)
    else:
        yield from _read_dump(item, opts)


def _read_dump(item: dict, opts: CorpusOptions) -> Iterator[dict]:
    """An uncompressed or gzip dump, in one piece: a damage loses the rest of the file."""
    where0 = f"{item['path']}@{item.get('start', 0)}"
    page, done = -1, 0
    try:
        stream = open_decompressed(item)
        with stream:
            for blob, page in iter_page_blobs(stream, opts.reading.max_record_bytes):
                done = stream.done()  # bytes of the file behind the pages read
                yield page_record(item, blob, f"{where0}#page{page}", opts.reading.max_record_bytes)
    except STREAM_ERRORS as err:
        end = item.get("end") or item.get("size") or done
        yield rest_lost(item, f"{where0}#page{page + 1}", err, page + 1, done, end)


class _Bz2Dump:
    """The reading of one work item of a `.bz2` dump: pages handed out once checked (`read`), then
    the dead letters of what damage lost (`lost_listed` with the index, `lost_estimated` without)."""

    def __init__(self, item: dict, opts: CorpusOptions):
        self.item, self.opts = item, opts
        self.streams = [tuple(s) for s in item.get("streams") or []]  # [(offset, pages listed)]
        self.firsts = [offset for offset, _ in self.streams]
        self.start = item.get("start", 0)
        self.end = item.get("end")  # None: to the end of the file
        self.size = item.get("size") or storage.size(item["path"])
        self.held: deque = deque()  # (blob, where, stream offset, output offset at its end, fed)
        self.got: dict[int, list] = {}  # index stream -> ids of the records handed out
        self.started: set[int] = set()  # index streams reached
        self.damages: list = []  # (Damage, compressed offset from which bytes were lost)
        self.kept = 0  # records handed out
        self.kept_upto = self.start  # compressed offset up to which pages were handed out
        self.last = self.start  # compressed offset read up to

    def segment(self, offset: int) -> int:
        """The index stream (its offset) that compressed byte `offset` belongs to."""
        return self.firsts[max(0, bisect_right(self.firsts, offset) - 1)] if self.firsts else self.start

    def release(self) -> dict:
        blob, where, stream, _, fed = self.held.popleft()
        record = page_record(self.item, blob, where, self.opts.reading.max_record_bytes)
        self.got.setdefault(self.segment(stream), []).append(record.get("id"))
        self.kept += 1
        self.kept_upto = max(self.kept_upto, fed)
        return record

    def read(self) -> Iterator[dict]:
        splitter = PageSplitter(self.opts.reading.max_record_bytes)
        path, out_at, stream, page = self.item["path"], 0, self.start, 0
        with storage.open_input(path, self.item.get("identity")) as f:
            for event in iter_bz2(f, self.start, self.end, self.firsts[1:]):
                if event[0] == "data":
                    _, chunk, self.last = event
                    out_at += len(chunk)
                    for blob in splitter.feed(chunk):
                        self.held.append((blob, f"{path}@{stream}#page{page}", stream, out_at, self.last))
                        page += 1
                    while self.held and out_at - self.held[0][3] > BLOCK_OUTPUT_MAX:
                        yield self.release()
                elif event[0] == "start":
                    stream, page = event[1], 0
                    self.started.add(self.segment(stream))
                elif event[0] == "end":
                    while self.held:
                        yield self.release()
                    self.kept_upto = self.last = event[1]
                else:  # a damaged stream: what it handed out is dropped, unchecked
                    damage = event[1]
                    self.held.clear()
                    splitter.reset()
                    self.damages.append((damage, max(damage.start, self.kept_upto)))
                    self.last = max(self.last, damage.failed_at)
        if splitter.inside_page:
            yield error_record(
                self.item, f"{path}@{stream}#page{page}", "truncated_input", "dump ends inside a page"
            )
        yield from self.lost_listed() if self.streams else self.lost_estimated()

    def lost_bytes(self, damage, lost_from: int, stop: int) -> int:
        """Bytes of the file a damage cost: from the end of the pages handed out before it (or the
        damaged stream's start) to where reading went on (or `stop`), within the file (a stream the
        file is cut inside of, per the index, runs on past its end)."""
        until = damage.resume if damage.resume is not None else max(stop, damage.failed_at)
        return max(0, min(until, self.size) - lost_from)

    def lost_estimated(self) -> Iterator[dict]:
        """Without the index: one dead letter per damage, its pages estimated from the bytes."""
        end = self.end if self.end is not None else self.size
        spans = [(self.lost_bytes(damage, lost_from, end), damage) for damage, lost_from in self.damages]
        read_bytes = max(0, end - self.start - sum(nbytes for nbytes, _ in spans))
        for nbytes, damage in spans:
            pages = estimate(nbytes, self.kept, read_bytes)
            if damage.truncated:
                then = "the file ends inside it"
            elif damage.resume is None:
                then = "nothing follows it"
            else:
                then = f"reading went on at byte {damage.resume}"
            yield lost_record(
                self.item,
                f"{self.item['path']}@{damage.start}",
                "truncated_input" if damage.truncated else "corrupt_input",
                f"bz2 stream at byte {damage.start} damaged ({damage.detail}): about {pages} "
                f"page{'' if pages == 1 else 's'} lost, estimated from its {nbytes} bytes at the rate of "
                f"the {self.kept} pages read; {then}",
                records=pages,
                estimated=True,
                nbytes=nbytes,
                rest_unknown=damage.truncated,
            )

    def lost_listed(self) -> Iterator[dict]:
        """With the index: every listed page of a damaged stream, or of one never reached (the file
        ends before it), that was not handed out is a dead letter with its id and title."""
        end = self.end if self.end is not None else self.size
        damaged: dict[int, list] = {}
        for d, lost_from in self.damages:
            damaged.setdefault(self.segment(d.start), []).append((d, lost_from))
        todo = [
            i for i, (offset, _) in enumerate(self.streams) if offset in damaged or offset not in self.started
        ]
        if not todo:
            return
        try:
            pages = index_pages(
                self.item["index"], {self.streams[i][0] for i in todo}, self.item.get("index_identity")
            )
        except (OSError, EOFError, ValueError):
            pages = {}  # the index became unreadable: the pages are counted, not named
        for i in todo:
            offset, listed = self.streams[i]
            stop = self.streams[i + 1][0] if i + 1 < len(self.streams) else end
            got = self.got.get(offset, [])
            lost_n = max(0, listed - len(got))
            seen = set(got)
            named = [
                (pid, title) for pid, title in pages.get(offset, []) if native_id(self.item, pid) not in seen
            ]
            if offset in damaged:
                first = damaged[offset][0][0]
                nbytes = sum(self.lost_bytes(d, frm, stop) for d, frm in damaged[offset])
                truncated = any(d.truncated for d, _ in damaged[offset])
                if first.start == offset:
                    detail = f"bz2 stream at byte {offset} damaged ({first.detail}): {lost_n} of its {listed} pages lost"
                else:  # the footer stream after the last page stream
                    detail = (
                        f"bz2 stream at byte {first.start} damaged ({first.detail}), after the {listed} pages "
                        f"at byte {offset}: {lost_n} lost"
                    )
            else:  # past the end of the file: not there at all
                nbytes, truncated = 0, True
                detail = f"bz2 stream at byte {offset} is past the end of the file: its {listed} pages lost"
            where = f"{self.item['path']}@{offset}"
            reason = "truncated_input" if truncated else "corrupt_input"
            common = {"estimated": False, "rest_unknown": False}
            if lost_n == 0 and nbytes == 0:
                continue
            if len(named) < lost_n or lost_n == 0:  # not named by the index: counted in one dead letter
                yield lost_record(self.item, where, reason, detail, records=lost_n, nbytes=nbytes, **common)
                continue
            for k, (pid, title) in enumerate(named[:lost_n]):
                doc_id = native_id(self.item, pid)
                yield lost_record(
                    self.item,
                    f"{where}#page{k}",
                    reason,
                    detail,
                    records=1,
                    nbytes=nbytes if k == 0 else 0,  # the stream's bytes, counted once
                    doc_id=doc_id,
                    title=title,
                    **common,
                )


def _read_bz2_dump(item: dict, opts: CorpusOptions) -> Iterator[dict]:
    yield from _Bz2Dump(item, opts).read()

"""Byte ranges: how a work item's file is cut into ranges that workers read independently
(`split_work`), and how a range is read back, decompressed (`open_decompressed`) or line by line
(`bounded_lines`).

A zhwiki dump with a multistream index becomes ranges of whole bz2 streams (`wiki_streams_per_range`
streams of 100 pages each); an uncompressed JSON-lines file becomes ranges of `jsonl_range_bytes`;
anything else stays one item (one file per worker).
"""

from __future__ import annotations

import bz2
import gzip
import io
from collections.abc import Iterator

from pipelines.core import storage
from pipelines.corpus.options import CorpusOptions

CHUNK = 1 << 20


def compression(path: str) -> str | None:
    """ "bz2", "gz" or None (read as is), from the file name."""
    name = path.lower()
    return "bz2" if name.endswith(".bz2") else "gz" if name.endswith(".gz") else None


def iter_index_offsets(index_path: str) -> Iterator[int]:
    """Distinct stream offsets of a multistream index (`offset:pageid:title` lines), in file order."""
    raw = storage.open_read(index_path)
    stream = bz2.BZ2File(raw) if compression(index_path) == "bz2" else raw
    last = None
    with stream:
        for line in stream:
            head = line.split(b":", 1)[0]
            if not head.strip():
                continue
            offset = int(head)
            if offset != last:
                yield offset
                last = offset


# A JSON-lines file is cut into at least this many ranges (each >= MIN_RANGE_BYTES): records are
# cleaned where they are read, so a file of a few ranges would leave workers idle.
MIN_RANGES = 64
MIN_RANGE_BYTES = 1 << 20


def jsonl_step(size: int, max_step: int) -> int:
    """Range size for a JSON-lines file of `size` bytes: at most `max_step`, small enough for
    MIN_RANGES ranges, never under MIN_RANGE_BYTES."""
    return max(1, min(max_step, max(MIN_RANGE_BYTES, -(-size // MIN_RANGES))))


def split_work(item: dict, opts: CorpusOptions) -> Iterator[dict]:
    """Split one file's work item into byte ranges that workers can read independently."""
    if item["kind"] == "zhwiki" and item.get("index"):
        yield from _split_multistream(item, opts)
    elif item["kind"] in ("wiki2019zh", "news2016zh") and compression(item["path"]) is None:
        step = jsonl_step(item["size"], opts.jsonl_range_bytes)
        for start in range(0, max(1, item["size"]), step):
            yield {**item, "start": start, "end": min(item["size"], start + step)}
    else:
        yield item


def _split_multistream(item: dict, opts: CorpusOptions) -> Iterator[dict]:
    """Ranges of `wiki_streams_per_range` consecutive bz2 streams. The header stream (siteinfo) before
    the first indexed offset holds no page and is skipped; the last range runs to the end of the file
    (it includes the closing `</mediawiki>` stream)."""
    try:
        offsets = iter_index_offsets(item["index"])
        start, n = None, 0
        for offset in offsets:
            if start is None:
                start = offset
            elif n == opts.wiki_streams_per_range:
                yield {**item, "start": start, "end": offset}
                start, n = offset, 0
            n += 1
        if start is None:
            raise ValueError("index has no offsets")
        yield {**item, "start": start, "end": item["size"]}
    except (OSError, EOFError, ValueError) as err:
        # An unreadable index costs parallelism, not data: read the whole dump in one piece.
        yield {**item, "index": None, "index_error": f"{type(err).__name__}: {err}"}


class _Range(io.RawIOBase):
    """A read-only view of bytes [start, end) of a binary file."""

    def __init__(self, f, start: int, end: int | None):
        self.f, self.left = f, (None if end is None else end - start)
        f.seek(start)

    def readable(self):
        return True

    def readinto(self, b):
        n = len(b) if self.left is None else min(len(b), self.left)
        if n <= 0:
            return 0
        data = self.f.read(n)
        b[: len(data)] = data
        if self.left is not None:
            self.left -= len(data)
        return len(data)


class _Decompressed(io.RawIOBase):
    """Decompressed bytes of a work item's byte range; closing it closes the underlying file (the
    bz2/gzip readers leave a file object they were given open)."""

    def __init__(self, item: dict):
        self.raw = storage.open_read(item["path"])
        view = io.BufferedReader(_Range(self.raw, item.get("start", 0), item.get("end")), buffer_size=CHUNK)
        kind = compression(item["path"])
        self.stream = (
            bz2.BZ2File(view) if kind == "bz2" else gzip.GzipFile(fileobj=view) if kind == "gz" else view
        )
        # BZ2File reads concatenated streams (multistream dumps) transparently

    def readable(self):
        return True

    def read(self, size=-1):
        return self.stream.read(size)

    def read1(self, size=-1):
        return self.stream.read1(size)

    def readline(self, size=-1):
        return self.stream.readline(size)

    def close(self):
        if not self.closed:
            self.stream.close()
            self.raw.close()
        super().close()


def open_decompressed(item: dict) -> _Decompressed:
    return _Decompressed(item)


def bounded_lines(f, start: int, end: int | None, max_bytes: int) -> Iterator[tuple[int, bytes | None]]:
    """(byte offset, line) for every line that STARTS in [start, end); None for a line over
    `max_bytes` (skipped without being held). `f` is positioned at `start`."""
    pos = start
    if start > 0:  # the line under `start` belongs to the previous range, unless it starts exactly here
        f.seek(start - 1)
        if f.read(1) != b"\n":
            while True:
                part = f.readline(CHUNK)
                pos += len(part)
                if not part or part.endswith(b"\n"):
                    break
    while end is None or pos < end:
        line = f.readline(max_bytes + 1)
        if not line:
            return
        at = pos
        pos += len(line)
        if len(line) > max_bytes and not line.endswith(b"\n"):
            while True:
                part = f.readline(CHUNK)
                pos += len(part)
                if not part or part.endswith(b"\n"):
                    break
            yield at, None
            continue
        yield at, line

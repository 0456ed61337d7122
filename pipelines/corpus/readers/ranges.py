"""Byte ranges: how a work item's file is cut into ranges that workers read independently
(`split_work`), and how a range is read back, decompressed (`open_decompressed`) or line by line
(`bounded_lines`).

A zhwiki dump with a multistream index becomes ranges of whole bz2 streams (`wiki_streams_per_range`
streams of 100 pages each, with the pages the index lists in each); an uncompressed JSON-lines file becomes ranges of `jsonl_range_bytes`;
anything else stays one item (one file per worker).
"""

from __future__ import annotations

import bz2
import gzip
import io
from collections.abc import Iterator

from core import storage
from core.errors import StorageFailed
from pipelines.corpus.options import CorpusOptions
from pipelines.corpus.readers.bz2streams import STREAM_HEAD
from pipelines.corpus.readers.error_records import failed_input

CHUNK = 1 << 20


def compression(path: str) -> str | None:
    """ "bz2", "gz" or None (read as is), from the file name."""
    name = path.lower()
    return "bz2" if name.endswith(".bz2") else "gz" if name.endswith(".gz") else None


def _index_lines(index_path: str, identity: dict | None = None) -> Iterator[bytes]:
    raw = storage.open_input(index_path, identity)
    stream = bz2.BZ2File(raw) if compression(index_path) == "bz2" else raw
    with stream:
        yield from stream


def iter_index_streams(index_path: str, identity: dict | None = None) -> Iterator[tuple[int, int]]:
    """(offset, pages) of every stream a multistream index (`offset:pageid:title` lines) lists, in
    file order."""
    last, pages = None, 0
    for line in _index_lines(index_path, identity):
        head = line.split(b":", 1)[0]
        if not head.strip():
            continue
        offset = int(head)
        if offset != last:
            if last is not None:
                yield last, pages
            last, pages = offset, 0
        pages += 1
    if last is not None:
        yield last, pages


def index_pages(
    index_path: str, offsets: set[int], identity: dict | None = None
) -> dict[int, list[tuple[str, str]]]:
    """(page id, title) of every page the index lists in the streams at `offsets`, in index order
    (read when streams are damaged: their pages are known by id)."""
    found: dict[int, list[tuple[str, str]]] = {}
    last = max(offsets, default=-1)
    for line in _index_lines(index_path, identity):
        parts = line.rstrip(b"\r\n").decode("utf-8", errors="replace").split(":", 2)
        if len(parts) < 2 or not parts[0].strip():
            continue
        offset = int(parts[0])
        if offset > last:
            break
        if offset in offsets:
            found.setdefault(offset, []).append((parts[1], parts[2] if len(parts) > 2 else ""))
    return found


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
        step = jsonl_step(item["size"], opts.reading.jsonl_range_bytes)
        for start in range(0, max(1, item["size"]), step):
            yield {**item, "start": start, "end": min(item["size"], start + step)}
    else:
        yield item


INDEX_SAMPLES = 16  # listed offsets checked against the dump (index_problem)


def index_problem(item: dict) -> str | None:
    """Why a zhwiki dump's multistream index cannot be used, or None when it can: it cannot be read to
    its end, lists no stream, or lists streams where the dump has none. For the last, up to
    INDEX_SAMPLES listed offsets inside the dump, spread over it, are looked at (a ranged read of 10
    bytes each): an index of another dump (another date, another part) misses the stream heads, and
    read with it, ranges would start inside streams and the dead letters would name pages that were in
    fact read. More than half must miss, so that a damaged stream head or two (damage the reader
    accounts for) do not discard a good index. Offsets past the end are not checked: a cut dump."""
    try:
        offsets = [offset for offset, _ in iter_index_streams(item["index"], item.get("index_identity"))]
    except StorageFailed:
        raise
    except (OSError, EOFError, ValueError) as err:
        return f"it cannot be read ({type(err).__name__}: {err})"
    size = item.get("size") or storage.size(item["path"])
    inside = [offset for offset in offsets if offset < size]
    if not inside:
        return "it lists no stream inside the dump" if offsets else "it lists no stream"
    step = max(1, len(inside) // INDEX_SAMPLES)
    sample = sorted(set(inside[::step][:INDEX_SAMPLES] + [inside[-1]]))
    missing = []
    with storage.open_input(item["path"], item.get("identity")) as f:
        for offset in sample:
            f.seek(offset)
            if not STREAM_HEAD.match(f.read(10)):
                missing.append(offset)
    if len(missing) * 2 > len(sample):
        return (
            f"the dump has no bz2 stream at {len(missing)} of {len(sample)} offsets it lists (the first at "
            f"byte {missing[0]}): it is not this dump's index"
        )
    return None


def _split_multistream(item: dict, opts: CorpusOptions) -> Iterator[dict]:
    """Ranges of `wiki_streams_per_range` consecutive bz2 streams, each with `streams`: [offset, pages
    the index lists] of its streams (readers/wiki.py accounts for every listed page). The header
    stream (siteinfo) before the first indexed offset holds no page and is skipped; the last range
    runs to the end of the file (it includes the closing `</mediawiki>` stream)."""
    try:
        ranges, streams = [], []
        for offset, pages in iter_index_streams(item["index"], item.get("index_identity")):
            if len(streams) == opts.reading.wiki_streams_per_range:
                ranges.append(streams)
                streams = []
            streams.append([offset, pages])
        if not streams:
            raise ValueError("index has no offsets")
        ranges.append(streams)
    except StorageFailed as err:  # not damage: the index could not be read as it was hashed
        yield {**item, "input_failed": failed_input(err)}
        return
    except (OSError, EOFError, ValueError) as err:
        # An unreadable index costs parallelism, not data: read the whole dump in one piece.
        yield {**item, "index": None, "index_error": f"{type(err).__name__}: {err}"}
        return
    for i, streams in enumerate(ranges):
        end = ranges[i + 1][0][0] if i + 1 < len(ranges) else item["size"]
        yield {**item, "start": streams[0][0], "end": end, "streams": streams}


class _Range(io.RawIOBase):
    """A read-only view of bytes [start, end) of a binary file; `done`: bytes read from it so far."""

    def __init__(self, f, start: int, end: int | None):
        self.f, self.left, self.done = f, (None if end is None else end - start), 0
        f.seek(start)

    def readable(self):
        return True

    def readinto(self, b):
        size = len(b) if self.left is None else min(len(b), self.left)
        if size <= 0:
            return 0
        data = self.f.read(size)
        b[: len(data)] = data
        if self.left is not None:
            self.left -= len(data)
        self.done += len(data)
        return len(data)


class _Decompressed(io.RawIOBase):
    """Decompressed bytes of a work item's byte range; closing it closes the underlying file (the
    bz2/gzip readers leave a file object they were given open). `done()`: the bytes of the file
    handed to the decompressor so far, from the range's start (where a damage was met, to within the
    decompressor's read size: 8 KiB for bz2, 128 KiB for gzip)."""

    def __init__(self, item: dict):
        self.raw = storage.open_input(item["path"], item.get("identity"))
        self.view = _Range(self.raw, item.get("start", 0), item.get("end"))
        kind = compression(item["path"])
        # BZ2File reads concatenated streams transparently; the decompressors buffer their input
        # themselves, so the view is theirs unbuffered and `done` is what they took
        self.stream = (
            bz2.BZ2File(self.view)
            if kind == "bz2"
            else gzip.GzipFile(fileobj=self.view)
            if kind == "gz"
            else io.BufferedReader(self.view, buffer_size=CHUNK)
        )

    def done(self) -> int:
        return self.view.done

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

"""Readers: `--source KIND:PATH` -> work items -> raw records (pure generators, no Beam).

Three steps, so that Beam can spread the reading over many workers:

1. `plan_sources` (launcher): parse the specs, expand globs, pair zhwiki dumps with their multistream
   index. One work item per file.
2. `split_work` (worker): a zhwiki dump with an index becomes byte ranges of whole bz2 streams
   (`wiki_streams_per_range` streams of 100 pages each); an uncompressed JSON-lines file becomes byte
   ranges of `jsonl_range_bytes`; anything else stays one item (one file per worker).
3. `read_work` (worker): yields raw records

       {"source", "id", "title", "url", "text", "markup": "wiki"|"plain", "where",
        "ns": int, "redirect": bool}                 (ns and redirect: zhwiki only)

   or, for what cannot be read, error records `{"source", "where", "error", "detail", "raw"}` (the
   dead letter). Memory is bounded by `max_record_bytes` whatever the file size.
"""

from __future__ import annotations

import bz2
import gzip
import io
import json
import re
import xml.etree.ElementTree as ET
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

from pipelines.core import storage
from pipelines.core.errors import UserError
from pipelines.corpus.options import CorpusOptions
from pipelines.documents import UnreadableFile, content_id

SOURCE_KINDS = ("zhwiki", "wiki2019zh", "news2016zh", "text", "peoples-daily")
# A damaged file: bad gzip/bz2 headers or CRCs (OSError), a stream that ends early (EOFError), corrupt
# deflate data (zlib.error). It becomes ONE dead letter naming the file and where reading stopped
# (what was read before is kept): a raw dump is big and often partly broken, and the share of dead
# letters (--max-dead-letter-fraction) decides whether the corpus is published.
_STREAM_ERRORS = (OSError, EOFError, zlib.error)
_CHUNK = 1 << 20
_RAW_EXCERPT = 500


@dataclass(frozen=True)
class SourceSpec:
    kind: str
    pattern: str


def parse_source(spec: str) -> SourceSpec:
    """`KIND:PATH` (PATH may be a glob or URL; optional for peoples-daily)."""
    kind, sep, path = spec.partition(":")
    if not sep or kind not in SOURCE_KINDS:
        raise UserError(
            f"--source must be KIND:PATH with KIND one of {', '.join(SOURCE_KINDS)}; got {spec!r}"
        )
    if not path and kind != "peoples-daily":
        raise UserError(f"--source {kind}: needs a path or glob after the colon")
    return SourceSpec(kind, path)


# --- planning -------------------------------------------------------------------------------------------


def _is_wiki_index(path: str) -> bool:
    name = storage.basename(path)
    return "index" in name and ".txt" in name


def wiki_index_name(dump_path: str) -> str | None:
    """The conventional multistream index beside a dump:
    zhwiki-D-pages-articles-multistream.xml.bz2 -> zhwiki-D-pages-articles-multistream-index.txt.bz2
    (partial dumps: ...-multistream1.xml-p1p187712.bz2 -> ...-multistream-index1.txt-p1p187712.bz2)."""
    name = storage.basename(dump_path)
    if "multistream" not in name or ".xml" not in name:
        return None
    index = re.sub(r"multistream(\d*)", r"multistream-index\1", name, count=1).replace(".xml", ".txt", 1)
    return dump_path[: len(dump_path) - len(name)] + index


def plan_sources(specs: list[str]) -> list[dict]:
    """Work items, one per input file: {kind, path, size, index, start, end}. UserError when a source
    matches nothing (a typo should not produce an empty corpus)."""
    items = []
    for raw in specs:
        spec = parse_source(raw)
        if spec.kind == "peoples-daily":
            path = "" if spec.pattern in ("", "sample") else spec.pattern
            if path and not storage.isfile(path):
                raise UserError(f"--source {raw}: no such file {path!r}")
            if path and storage.size(path) == 0:
                raise UserError(f"--source {raw}: {path} is empty (0 bytes)")
            items.append({"kind": spec.kind, "path": path, "size": 0, "index": None, "start": 0, "end": None})
            continue
        found = storage.match(spec.pattern)
        if not found and storage.isdir(spec.pattern):
            folder = spec.pattern.rstrip("/")
            raise UserError(
                f"--source {raw}: {folder} is a folder; give its files (e.g. '{spec.kind}:{folder}/*')"
            )
        if not found:
            raise UserError(f"--source {raw}: no file matches {spec.pattern!r}")
        if all(size == 0 for _, size in found):
            raise UserError(f"--source {raw}: every file it matches is empty (0 bytes)")
        if spec.kind == "zhwiki":
            indexes = {p for p, _ in found if _is_wiki_index(p)}
            for path, size in found:
                if path in indexes:
                    continue
                index = wiki_index_name(path)
                if index and index not in indexes and not storage.exists(index):
                    index = None
                items.append(
                    {"kind": "zhwiki", "path": path, "size": size, "index": index, "start": 0, "end": None}
                )
        else:
            for path, size in found:
                items.append(
                    {"kind": spec.kind, "path": path, "size": size, "index": None, "start": 0, "end": None}
                )
    return items


def _compression(path: str) -> str | None:
    name = path.lower()
    return "bz2" if name.endswith(".bz2") else "gz" if name.endswith(".gz") else None


def iter_index_offsets(index_path: str) -> Iterator[int]:
    """Distinct stream offsets of a multistream index (`offset:pageid:title` lines), in file order."""
    raw = storage.open_read(index_path)
    stream = bz2.BZ2File(raw) if _compression(index_path) == "bz2" else raw
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


def split_work(item: dict, opts: CorpusOptions) -> Iterator[dict]:
    """Split one file's work item into byte ranges that workers can read independently."""
    if item["kind"] == "zhwiki" and item.get("index"):
        yield from _split_multistream(item, opts)
    elif item["kind"] in ("wiki2019zh", "news2016zh") and _compression(item["path"]) is None:
        step = max(1, opts.jsonl_range_bytes)
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


# --- reading ----------------------------------------------------------------------------------------------


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
        view = io.BufferedReader(_Range(self.raw, item.get("start", 0), item.get("end")), buffer_size=_CHUNK)
        kind = _compression(item["path"])
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


def _open_decompressed(item: dict) -> _Decompressed:
    return _Decompressed(item)


def _error(item: dict, where: str, error: str, detail: str, raw: bytes | str = b"") -> dict:
    if isinstance(raw, bytes):
        raw = raw[:_RAW_EXCERPT].decode("utf-8", errors="replace")
    return {
        "source": item["kind"],
        "where": where,
        "error": error,
        "detail": detail[:300],
        "raw": raw[:_RAW_EXCERPT],
    }


def _stream_error(err: BaseException) -> str:
    if isinstance(err, EOFError):
        return "truncated_input"
    if isinstance(err, (FileNotFoundError, PermissionError, IsADirectoryError)):
        return "unreadable_input"  # gone or not readable by the worker: not the file's content
    return "corrupt_input"


def read_work(item: dict, opts: CorpusOptions) -> Iterator[dict]:
    kind = item["kind"]
    if kind == "zhwiki":
        yield from read_wiki_pages(item, opts)
    elif kind in ("wiki2019zh", "news2016zh"):
        yield from read_jsonl(item, opts)
    elif kind == "text":
        yield from read_text(item, opts)
    elif kind == "peoples-daily":
        yield from read_peoples_daily(item)
    else:
        raise ValueError(f"unknown source kind {kind}")


# zhwiki ---------------------------------------------------------------------------------------------------

_PAGE_OPEN, _PAGE_CLOSE = b"<page>", b"</page>"


def iter_page_blobs(stream, max_bytes: int) -> Iterator[tuple[bytes | None, int]]:
    """Split a decompressed MediaWiki XML stream into `<page>...</page>` byte blobs, incrementally.

    Yields (blob, n) for page n of the stream; (None, n) for a page over `max_bytes` (skipped without
    being buffered). `<` inside page text is always escaped as `&lt;`, so the markers cannot occur
    inside content. Bytes outside pages (siteinfo, `</mediawiki>`) are ignored."""
    buf = b""
    n = 0
    skipping = False
    # read1: what is decompressed so far comes back before a truncated stream raises
    read = stream.read1 if hasattr(stream, "read1") else stream.read
    while True:
        chunk = read(_CHUNK)
        if not chunk:
            break
        buf += chunk
        while True:
            if skipping:
                end = buf.find(_PAGE_CLOSE)
                if end < 0:
                    buf = buf[-len(_PAGE_CLOSE) :]
                    break
                buf = buf[end + len(_PAGE_CLOSE) :]
                skipping = False
                yield None, n
                n += 1
                continue
            start = buf.find(_PAGE_OPEN)
            if start < 0:
                buf = buf[-len(_PAGE_OPEN) :]
                break
            end = buf.find(_PAGE_CLOSE, start)
            if end < 0:
                buf = buf[start:]
                if len(buf) > max_bytes:
                    skipping, buf = True, buf[-len(_PAGE_CLOSE) :]
                break
            blob, buf = buf[start : end + len(_PAGE_CLOSE)], buf[end + len(_PAGE_CLOSE) :]
            if len(blob) > max_bytes:
                yield None, n
            else:
                yield blob, n
            n += 1
    if skipping or buf.find(_PAGE_OPEN) >= 0:
        raise EOFError(f"stream ended inside page {n}")


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


def read_wiki_pages(item: dict, opts: CorpusOptions) -> Iterator[dict]:
    where0 = f"{item['path']}@{item.get('start', 0)}"
    n = -1
    try:
        with _open_decompressed(item) as stream:
            for blob, n in iter_page_blobs(stream, opts.max_record_bytes):
                where = f"{where0}#page{n}"
                if blob is None:
                    yield _error(item, where, "record_too_large", f"page over {opts.max_record_bytes} bytes")
                    continue
                try:
                    page = parse_page(blob)
                except UnicodeDecodeError as err:
                    yield _error(item, where, "invalid_utf8", str(err), blob)
                    continue
                except ET.ParseError as err:
                    yield _error(item, where, "xml_error", str(err), blob)
                    continue
                if not page["id"]:
                    yield _error(item, where, "missing_field", "page without <id>", blob)
                    continue
                yield {
                    "source": "zhwiki",
                    "id": f"zhwiki:{page['id']}",
                    "title": page["title"],
                    "url": _wiki_url(item["path"], page["id"]),
                    "text": page["text"],
                    "markup": "wiki",
                    "where": where,
                    "ns": page["ns"],
                    "redirect": page["redirect"],
                }
    except _STREAM_ERRORS as err:
        # Truncated or corrupt compressed data: what was read is kept, the rest is one dead letter.
        yield _error(item, f"{where0}#page{n + 1}", _stream_error(err), f"{type(err).__name__}: {err}")


# JSON lines ---------------------------------------------------------------------------------------------


def _bounded_lines(f, start: int, end: int | None, max_bytes: int) -> Iterator[tuple[int, bytes | None]]:
    """(byte offset, line) for every line that STARTS in [start, end); None for a line over
    `max_bytes` (skipped without being held). `f` is positioned at `start`."""
    pos = start
    if start > 0:  # the line under `start` belongs to the previous range, unless it starts exactly here
        f.seek(start - 1)
        if f.read(1) != b"\n":
            while True:
                part = f.readline(_CHUNK)
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
                part = f.readline(_CHUNK)
                pos += len(part)
                if not part or part.endswith(b"\n"):
                    break
            yield at, None
            continue
        yield at, line


def _json_record(kind: str, obj: dict) -> dict:
    """Map one brightmart/nlp_chinese_corpus object to a raw record (KeyError: a field is missing)."""
    if kind == "wiki2019zh":
        title, text = obj.get("title") or "", obj["text"]
        first, _, rest = text.partition("\n")
        if first.strip() == title.strip():  # wiki2019zh repeats the title as the first line
            text = rest
        native, url = obj.get("id"), obj.get("url") or ""
    else:  # news2016zh
        title, text, native, url = obj.get("title") or "", obj["content"], obj.get("news_id"), ""
    if not isinstance(text, str):
        raise KeyError("text is not a string")
    doc_id = f"{kind}:{native}" if native not in (None, "") else content_id(kind, text)
    return {
        "source": kind,
        "id": doc_id,
        "title": str(title),
        "url": str(url),
        "text": text,
        "markup": "plain",
    }


def read_jsonl(item: dict, opts: CorpusOptions) -> Iterator[dict]:
    kind = item["kind"]
    compressed = _compression(item["path"]) is not None
    try:
        if compressed:
            stream = _open_decompressed(item)
            start, end = 0, None
        else:
            stream = storage.open_read(item["path"])
            start, end = item.get("start", 0), item.get("end")
            stream.seek(start)
        with stream:
            for at, line in _bounded_lines(stream, start, end, opts.max_record_bytes):
                where = f"{item['path']}:{at}"
                if line is None:
                    yield _error(item, where, "record_too_large", f"line over {opts.max_record_bytes} bytes")
                    continue
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line.decode("utf-8"))
                except UnicodeDecodeError as err:
                    yield _error(item, where, "invalid_utf8", str(err), line)
                    continue
                except ValueError as err:
                    yield _error(item, where, "malformed_json", str(err), line)
                    continue
                try:
                    if not isinstance(obj, dict):
                        raise KeyError("not a JSON object")
                    record = _json_record(kind, obj)
                except KeyError as err:
                    yield _error(item, where, "missing_field", f"missing or invalid field {err}", line)
                    continue
                record["where"] = where
                yield record
    except _STREAM_ERRORS as err:
        yield _error(item, item["path"], _stream_error(err), f"{type(err).__name__}: {err}")


# text -----------------------------------------------------------------------------------------------------


def read_text(item: dict, opts: CorpusOptions) -> Iterator[dict]:
    """One sentence per line, a blank line between documents. A document with an undecodable line
    or over `max_record_bytes` is one dead letter; ids hash the content (no native id)."""
    lines: list[str] = []
    size, bad, first_line, lineno = 0, None, 0, 0

    def flush():
        where = f"{item['path']}:{first_line}"
        if bad is not None:
            return _error(item, where, bad[0], bad[1], bad[2])
        text = "\n".join(lines)
        return {
            "source": "text",
            "id": content_id("text", text),
            "title": "",
            "url": "",
            "text": text,
            "markup": "plain",
            "where": where,
        }

    try:
        with _open_decompressed(item) as stream:
            for _, raw in _bounded_lines(stream, 0, None, opts.max_record_bytes):
                lineno += 1
                if raw is not None and not raw.strip():
                    if lines or bad:
                        yield flush()
                    lines, size, bad = [], 0, None
                    continue
                if not lines and bad is None:
                    first_line = lineno
                if bad is not None:
                    continue
                size += len(raw) if raw is not None else opts.max_record_bytes + 1
                if raw is None or size > opts.max_record_bytes:
                    bad, lines = ("record_too_large", f"document over {opts.max_record_bytes} bytes", b""), []
                    continue
                try:
                    lines.append(raw.decode("utf-8").rstrip("\r\n"))
                except UnicodeDecodeError as err:
                    bad, lines = ("invalid_utf8", f"line {lineno}: {err}", raw), []
            if lines or bad:
                yield flush()
    except _STREAM_ERRORS as err:
        yield _error(item, f"{item['path']}:{lineno}", _stream_error(err), f"{type(err).__name__}: {err}")


# peoples-daily ---------------------------------------------------------------------------------------------


def read_peoples_daily(item: dict) -> Iterator[dict]:
    from pipelines.peoples_daily import read_articles

    path = item["path"] or None
    try:
        for doc in read_articles(path):
            yield _peoples_daily_record(doc)
    except UnreadableFile as err:
        yield _error(item, path or "", "corrupt_input", str(err))


def _peoples_daily_record(doc: dict) -> dict:
    return {
        "source": "peoples-daily",
        "id": doc["id"],
        "title": doc["title"],
        "url": "",
        "text": "\n".join(doc["sentences"]),
        "markup": "plain",
        "where": doc["id"],
    }

"""zhwiki: a MediaWiki XML dump (bz2, optionally multistream with its index) -> one raw record per
`<page>`, with its namespace and redirect flag (the cleaning step decides what to keep)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator

from pipelines.core import storage
from pipelines.corpus.options import CorpusOptions
from pipelines.corpus.readers.errors import STREAM_ERRORS, error_record, stream_error
from pipelines.corpus.readers.ranges import CHUNK, open_decompressed

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
        chunk = read(CHUNK)
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
        with open_decompressed(item) as stream:
            for blob, n in iter_page_blobs(stream, opts.max_record_bytes):
                where = f"{where0}#page{n}"
                if blob is None:
                    yield error_record(
                        item, where, "record_too_large", f"page over {opts.max_record_bytes} bytes"
                    )
                    continue
                try:
                    page = parse_page(blob)
                except UnicodeDecodeError as err:
                    yield error_record(item, where, "invalid_utf8", str(err), blob)
                    continue
                except ET.ParseError as err:
                    yield error_record(item, where, "xml_error", str(err), blob)
                    continue
                if not page["id"]:
                    yield error_record(item, where, "missing_field", "page without <id>", blob)
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
    except STREAM_ERRORS as err:
        # Truncated or corrupt compressed data: what was read is kept, the rest is one dead letter.
        yield error_record(item, f"{where0}#page{n + 1}", stream_error(err), f"{type(err).__name__}: {err}")

"""Inputs in the exact formats of the real sources, made from any articles: MediaWiki `pages-articles`
XML dumps (plain or multistream with its index), and brightmart's news2016zh JSON lines. The tests build
their fixtures with it, and `albert rehearse` the dumps its weekly run reads; `MultistreamWriter` writes
a dump too large to hold in memory page by page.

zhwiki: MediaWiki `pages-articles` XML export, as in the dumps (`<mediawiki xmlns=".../export-0.10/">`,
`<siteinfo>` with `<namespaces>`, then `<page>` elements with title, ns, id, optional
`<redirect title=.../>`, and `<revision>` holding `<text xml:space="preserve">`). Multistream dumps are
concatenated bz2 streams: the header, then one stream per 100 pages, then the closing tag; the index is
bz2 text, one `offset:pageid:title` line per page.
"""

from __future__ import annotations

import bz2
import json
from xml.sax.saxutils import escape, quoteattr

from core import storage

HEADER = """<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:schemaLocation="http://www.mediawiki.org/xml/export-0.10/ http://www.mediawiki.org/xml/export-0.10.xsd" version="0.10" xml:lang="zh">
  <siteinfo>
    <sitename>Wikipedia</sitename>
    <dbname>zhwiki</dbname>
    <base>https://zh.wikipedia.org/wiki/Wikipedia:%E9%A6%96%E9%A1%B5</base>
    <generator>MediaWiki 1.43.0-wmf.1</generator>
    <case>first-letter</case>
    <namespaces>
      <namespace key="-2" case="first-letter">Media</namespace>
      <namespace key="-1" case="first-letter">Special</namespace>
      <namespace key="0" case="first-letter" />
      <namespace key="1" case="first-letter">Talk</namespace>
      <namespace key="4" case="first-letter">Wikipedia</namespace>
      <namespace key="6" case="first-letter">File</namespace>
      <namespace key="10" case="first-letter">Template</namespace>
      <namespace key="14" case="first-letter">Category</namespace>
    </namespaces>
  </siteinfo>
"""
FOOTER = "</mediawiki>\n"


def page_xml(page_id: int, title: str, text: str, ns: int = 0, redirect: str | None = None) -> str:
    redirect_xml = f"    <redirect title={quoteattr(redirect)} />\n" if redirect else ""
    return (
        "  <page>\n"
        f"    <title>{escape(title)}</title>\n"
        f"    <ns>{ns}</ns>\n"
        f"    <id>{page_id}</id>\n"
        f"{redirect_xml}"
        "    <revision>\n"
        f"      <id>{page_id * 10 + 7}</id>\n"
        f"      <parentid>{page_id * 10 + 3}</parentid>\n"
        "      <timestamp>2026-10-01T12:00:00Z</timestamp>\n"
        "      <contributor>\n        <username>Fixture</username>\n        <id>42</id>\n      </contributor>\n"
        "      <comment>fixture</comment>\n"
        "      <model>wikitext</model>\n"
        "      <format>text/x-wiki</format>\n"
        f'      <text bytes="{len(text.encode())}" xml:space="preserve">{escape(text)}</text>\n'
        "      <sha1>0000000000000000000000000000000</sha1>\n"
        "    </revision>\n"
        "  </page>\n"
    )


def article_wikitext(title: str, sentences: list[str]) -> str:
    """A realistic article around real sentences: infobox, refs, a table, a file, list items,
    conversion markup, a references section, categories and an interlanguage link."""
    body = "".join(sentences[1:])
    half = len(sentences) // 2
    return (
        (
            "{{Infobox 新闻\n| 名称 = " + title + "\n| 日期 = 1998年1月\n}}\n"
            f"'''{title}'''是-{{zh-hans:一篇报道;zh-hant:一篇報導}}-。<ref>{{{{cite news|title=x}}}}</ref>\n"
            + "".join(sentences[1 : half + 1])
            + "\n\n== 内容 ==\n"
            + "".join(sentences[half + 1 :])
            + "<ref name=a>来源</ref>\n"
            "[[File:Example.jpg|thumb|图片说明]]\n"
            '{| class="wikitable"\n|-\n! 项目 !! 数值\n|-\n| 甲 || 1\n|}\n'
            "* 第一项要点说明。\n* 第二项要点说明。\n"
            "== 参考文献 ==\n{{reflist}}\n* 参考书目一\n"
            "[[Category:新闻]]\n[[en:News]]\n"
        )
        if body
        else ""
    )


def article_pages(articles: list[dict], first_id: int = 1000) -> list[str]:
    """`<page>` elements of articles ({title, sentences}), page ids from `first_id`."""
    return [
        page_xml(first_id + i, a["title"] or f"条目{i}", article_wikitext(a["title"], a["sentences"]))
        for i, a in enumerate(articles)
    ]


def index_path(dump_path: str) -> str:
    """The multistream index beside a dump, named as Wikimedia names it."""
    name = storage.basename(dump_path).replace("multistream", "multistream-index").replace(".xml", ".txt")
    return storage.join(storage.dirname(dump_path), name)


def _stream(pages: list[str], offset: int) -> tuple[bytes, list[str]]:
    """One bz2 stream of pages starting at byte `offset` of the dump, and its index lines."""
    lines = []
    for page in pages:
        pid = page.split("<id>", 1)[1].split("</id>", 1)[0]
        title = page.split("<title>", 1)[1].split("</title>", 1)[0]
        lines.append(f"{offset}:{pid}:{title}")
    return bz2.compress("".join(pages).encode("utf-8")), lines


def write_dump(path: str, pages: list[str], multistream: bool = False, per_stream: int = 100) -> str | None:
    """Write pages as a bz2 dump (a path or URL); with multistream, also the index beside it, named as
    Wikimedia names it. Returns the index path."""
    if not multistream:
        storage.write_bytes(path, bz2.compress((HEADER + "".join(pages) + FOOTER).encode("utf-8")))
        return None
    streams = [bz2.compress(HEADER.encode("utf-8"))]
    index_lines = []
    offset = len(streams[0])
    for i in range(0, len(pages), per_stream):
        data, lines = _stream(pages[i : i + per_stream], offset)
        index_lines.extend(lines)
        streams.append(data)
        offset += len(data)
    streams.append(bz2.compress(FOOTER.encode("utf-8")))
    storage.write_bytes(path, b"".join(streams))
    index = index_path(path)
    storage.write_bytes(index, bz2.compress(("\n".join(index_lines) + "\n").encode("utf-8")))
    return index


class MultistreamWriter:
    """A multistream dump written page by page, with the same bytes as `write_dump(path, pages,
    multistream=True)`: memory holds one stream's pages and the compressed index, whatever the size of
    the dump. Not atomic: the dump grows in place; `close` writes the index and returns its path."""

    def __init__(self, path: str, per_stream: int = 100):
        self.path, self.per_stream = path, per_stream
        self._out = storage.open_write(path)
        self._pending: list[str] = []
        self._index = bz2.BZ2Compressor()
        self._index_parts: list[bytes] = []
        head = bz2.compress(HEADER.encode("utf-8"))
        self._out.write(head)
        self._offset = len(head)

    def add(self, page: str) -> None:
        self._pending.append(page)
        if len(self._pending) == self.per_stream:
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        data, lines = _stream(self._pending, self._offset)
        self._out.write(data)
        self._offset += len(data)
        self._index_parts.append(self._index.compress(("\n".join(lines) + "\n").encode("utf-8")))
        self._pending = []

    def close(self) -> str:
        self._flush()
        if not self._index_parts:  # no page: write_dump's index is one empty line
            self._index_parts.append(self._index.compress(b"\n"))
        self._out.write(bz2.compress(FOOTER.encode("utf-8")))
        self._out.close()
        index = index_path(self.path)
        storage.write_bytes(index, b"".join(self._index_parts) + self._index.flush())
        return index

    def __enter__(self) -> MultistreamWriter:
        return self

    def __exit__(self, *exc) -> None:
        if exc[0] is None:
            self.close()
        else:
            self._out.close()


def news2016zh_line(
    news_id: str, title: str, sentences: list[str], source: str = "fixture", sep: str = ""
) -> str:
    """One line of brightmart's news2016zh JSON lines; `sep` joins the sentences into its content."""
    record = {
        "news_id": news_id,
        "keywords": "",
        "title": title,
        "desc": sentences[0] if sentences else "",
        "source": source,
        "time": "2016-06-01 12:00",
        "content": sep.join(sentences),
    }
    return json.dumps(record, ensure_ascii=False)


# --- damage, as real dumps arrive (a bad disk, a cut download) ---------------------------------------------


def stream_offsets(dump_path: str) -> list[int]:
    """The offset of every bz2 stream of a dump (header and footer streams included), found by their
    headers (pipelines.corpus.readers.bz2streams.STREAM_HEAD)."""
    from pipelines.corpus.readers.bz2streams import STREAM_HEAD

    return [m.start() for m in STREAM_HEAD.finditer(storage.read_bytes(dump_path))]


def flip_bytes(path: str, at: int, n: int = 40) -> None:
    """Damage a file in place: invert `n` bytes from byte `at`."""
    data = bytearray(storage.read_bytes(path))
    for i in range(at, min(at + n, len(data))):
        data[i] ^= 0xFF
    storage.write_bytes(path, bytes(data))


def damage_stream(dump_path: str, stream: int, n: int = 40) -> tuple[int, int]:
    """Invert `n` bytes in the middle of bz2 stream number `stream` of a dump (0: the header stream);
    returns the stream's (start, end) offsets."""
    offsets = stream_offsets(dump_path) + [storage.size(dump_path)]
    start, end = offsets[stream], offsets[stream + 1]
    flip_bytes(dump_path, (start + end) // 2 - n // 2, n)
    return start, end


def cut(path: str, keep: float) -> None:
    """Cut a file short, as a broken download leaves it: keep the first `keep` share of its bytes."""
    data = storage.read_bytes(path)
    storage.write_bytes(path, data[: int(len(data) * keep)])

"""Inputs in the exact formats of the real sources, made from any articles: MediaWiki `pages-articles`
XML dumps (plain or multistream with its index), and brightmart's news2016zh JSON lines. The tests build
their fixtures with it, and `albert rehearse` the dumps its weekly run reads.

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

from pipelines.core import storage

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


def write_dump(path: str, pages: list[str], multistream: bool = False, per_stream: int = 100) -> str | None:
    """Write pages as a bz2 dump (a path or URL); with multistream, also the index beside it, named as
    Wikimedia names it. Returns the index path."""
    if not multistream:
        storage.write_bytes(path, bz2.compress((HEADER + "".join(pages) + FOOTER).encode("utf-8")))
        return None
    streams = [bz2.compress(HEADER.encode("utf-8"))]
    offsets = []
    index_lines = []
    offset = len(streams[0])
    for i in range(0, len(pages), per_stream):
        chunk = pages[i : i + per_stream]
        data = bz2.compress("".join(chunk).encode("utf-8"))
        for page in chunk:
            pid = page.split("<id>", 1)[1].split("</id>", 1)[0]
            title = page.split("<title>", 1)[1].split("</title>", 1)[0]
            index_lines.append(f"{offset}:{pid}:{title}")
        offsets.append(offset)
        streams.append(data)
        offset += len(data)
    streams.append(bz2.compress(FOOTER.encode("utf-8")))
    storage.write_bytes(path, b"".join(streams))
    name = storage.basename(path).replace("multistream", "multistream-index").replace(".xml", ".txt")
    index = storage.join(storage.dirname(path), name)
    storage.write_bytes(index, bz2.compress(("\n".join(index_lines) + "\n").encode("utf-8")))
    return index


def news2016zh_line(news_id: str, title: str, sentences: list[str], source: str = "fixture") -> str:
    """One line of brightmart's news2016zh JSON lines."""
    record = {
        "news_id": news_id,
        "keywords": "",
        "title": title,
        "desc": sentences[0] if sentences else "",
        "source": source,
        "time": "2016-06-01 12:00",
        "content": "".join(sentences),
    }
    return json.dumps(record, ensure_ascii=False)

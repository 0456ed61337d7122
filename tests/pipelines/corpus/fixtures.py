"""Builders of tiny inputs in the exact formats of the real sources (made in tests, nothing checked in).

zhwiki: MediaWiki `pages-articles` XML export, as in the dumps (and the English excerpt gensim ships:
`<mediawiki xmlns=".../export-0.10/">`, `<siteinfo>` with `<namespaces>`, then `<page>` elements with
title, ns, id, optional `<redirect title=.../>`, and `<revision>` holding `<text xml:space="preserve">`).
Multistream dumps are concatenated bz2 streams: the header, then one stream per 100 pages, then the
closing tag; the index is bz2 text, one `offset:pageid:title` line per page.
"""

from __future__ import annotations

import bz2
import json
import os
from xml.sax.saxutils import escape, quoteattr

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
    """Write pages as a bz2 dump; with multistream, also the index beside it. Returns the index path."""
    if not multistream:
        with open(path, "wb") as f:
            f.write(bz2.compress((HEADER + "".join(pages) + FOOTER).encode("utf-8")))
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
    with open(path, "wb") as f:
        f.write(b"".join(streams))
    folder, name = os.path.split(path)
    index = os.path.join(folder, name.replace("multistream", "multistream-index").replace(".xml", ".txt"))
    with open(index, "wb") as f:
        f.write(bz2.compress(("\n".join(index_lines) + "\n").encode("utf-8")))
    return index


def write_jsonl(path: str, records: list, raw_lines: list[bytes] = ()) -> None:
    with open(path, "wb") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False).encode("utf-8") + b"\n")
        for line in raw_lines:
            f.write(line + b"\n")


def write_text(path: str, docs: list[list[str]], raw: bytes = b"") -> None:
    with open(path, "wb") as f:
        f.write("\n\n".join("\n".join(d) for d in docs).encode("utf-8") + b"\n")
        if raw:
            f.write(b"\n" + raw)


def make_sources(root: str, articles: list[dict]) -> dict:
    """Inputs of every source kind, with broken records, built from sample articles. Returns
    {"specs": [--source ...], "expected": {what the tests can count on}}."""
    os.makedirs(root, exist_ok=True)
    arts = [a for a in articles if sum(len(s) for s in a["sentences"]) > 200]
    wiki_arts, w19, n16, txt = arts[0:150], arts[150:160], arts[160:170], arts[170:180]

    # zhwiki multistream: 150 articles + redirects + a disambiguation page + a talk page + an empty page
    pages = [
        page_xml(1000 + i, a["title"] or f"条目{i}", article_wikitext(a["title"], a["sentences"]))
        for i, a in enumerate(wiki_arts)
    ]
    pages.append(page_xml(2001, "重定向页", "#重定向 [[条目0]]", redirect="条目0"))
    pages.append(page_xml(2002, "本地化重定向", "#REDIRECT [[条目1]]"))
    pages.append(
        page_xml(
            2003,
            "苹果 (消歧义)",
            "'''苹果'''可以指：\n* [[苹果]]，一种水果。\n* [[苹果公司]]。\n{{disambig}}",
        )
    )
    pages.append(page_xml(2004, "Talk:条目0", "讨论内容。" * 30, ns=1))
    pages.append(page_xml(2005, "空页面", ""))
    index = write_dump(
        os.path.join(root, "zhwiki-20261101-pages-articles-multistream.xml.bz2"), pages, multistream=True
    )

    # a second, non-multistream dump that is truncated in the middle
    small = [
        page_xml(3000 + i, f"截断{i}", article_wikitext(a["title"], a["sentences"]))
        for i, a in enumerate(arts[180:200])
    ]
    full = bz2.compress((HEADER + "".join(small) + FOOTER).encode("utf-8"))
    with open(os.path.join(root, "zhwiki-20261101-pages-articles-broken.xml.bz2"), "wb") as f:
        f.write(full[: len(full) // 2])

    write_jsonl(
        os.path.join(root, "wiki2019zh.json"),
        [
            {
                "id": str(50 + i),
                "url": f"https://zh.wikipedia.org/wiki?curid={50 + i}",
                "title": a["title"],
                "text": a["title"] + "\n\n" + "\n".join(a["sentences"][1:]),
            }
            for i, a in enumerate(w19)
        ],
        raw_lines=[
            b'{"id": "99", "title": "broken',
            b'{"id": "98", "title": "bad", "text": "\xff\xfe invalid"}',
            b'{"id": "97", "title": "no text"}',
        ],
    )
    write_jsonl(
        os.path.join(root, "news2016zh.json"),
        [
            {
                "news_id": f"n{i}",
                "keywords": "新闻",
                "title": a["title"],
                "desc": "",
                "source": "人民日报",
                "time": "1998-01-01",
                "content": "\n".join(a["sentences"][1:]),
            }
            for i, a in enumerate(n16)
        ]
        + [
            {
                "news_id": "dup",
                "keywords": "",
                "title": w19[0]["title"],
                "desc": "",
                "source": "x",
                "time": "",
                "content": "\n".join(w19[0]["sentences"][1:]),
            }
        ],
        raw_lines=[b"not json at all"],
    )
    write_text(
        os.path.join(root, "text.txt"),
        [a["sentences"] for a in txt] + [txt[0]["sentences"]],
        raw=b"\xc3\x28 broken utf8 line\n",
    )
    # the bundled sample's format, cut to its first 400 paragraphs (the whole file takes seconds)
    from pipelines.peoples_daily import sample_path

    with (
        open(sample_path(), encoding="utf-8") as src,
        open(os.path.join(root, "199801-head.txt"), "w", encoding="utf-8") as dst,
    ):
        for _, line in zip(range(400), src):
            dst.write(line)
    specs = [
        f"zhwiki:{root}/zhwiki-*.bz2",
        f"wiki2019zh:{root}/wiki2019zh.json",
        f"news2016zh:{root}/news2016zh.json",
        f"text:{root}/text.txt",
        f"peoples-daily:{root}/199801-head.txt",
    ]
    return {"specs": specs, "index": index}

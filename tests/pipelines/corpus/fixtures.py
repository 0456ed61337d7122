"""Builders of tiny inputs in the exact formats of the real sources (made in tests, nothing checked in),
and reading them back through the corpus readers. The dump format itself (zhwiki XML, multistream and
its index) is pipelines/corpus/dumps.py's."""

from __future__ import annotations

import bz2
import json
import os

from pipelines.corpus import sources
from pipelines.corpus.dumps import FOOTER, HEADER, article_pages, article_wikitext, page_xml, write_dump  # noqa: F401
from pipelines.corpus.options import CorpusOptions


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
    from core.peoples_daily import sample_path

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


OPTS = CorpusOptions()


def _pages(n, start=1):
    return [page_xml(start + i, f"条目{i}", f"第{i}个条目的正文。" * 3) for i in range(n)]


def _read_all(items, opts=OPTS):
    return [
        r for item in items for part in sources.split_work(item, opts) for r in sources.read_work(part, opts)
    ]


# --- a 500-page multistream dump of real articles, to damage ------------------------------------------------

DUMP = "zhwiki-20261101-pages-articles-multistream.xml.bz2"
NAME = f"zhwiki:{DUMP}"  # its records' id prefix, and its key in stats.json `files`
PAGES, PER_STREAM = 500, 50  # 10 page streams, between the header and the footer stream
ALL_IDS = [f"{NAME}:{1000 + i}" for i in range(PAGES)]


def write_wiki(folder: str, articles: list[dict]) -> str:
    """The dump of `articles` (PAGES of them, page ids from 1000) with its index, in `folder`."""
    dump = os.path.join(folder, DUMP)
    write_dump(dump, article_pages(articles, 1000), multistream=True, per_stream=PER_STREAM)
    return dump


def stream_ids(k: int) -> list[str]:
    """Ids of the pages of page stream k (1..10) of `write_wiki`'s dump."""
    return ALL_IDS[(k - 1) * PER_STREAM : k * PER_STREAM]


def write_sample_head(path: str, lines: int) -> str:
    """The bundled People's Daily sample's first `lines` lines (paragraphs) as a file of its own: a
    `peoples-daily:PATH` source smaller than the sample."""
    from core.peoples_daily import sample_path

    with open(sample_path(), encoding="utf-8") as src, open(path, "w", encoding="utf-8") as dst:
        for _, line in zip(range(lines), src):
            dst.write(line)
    return path

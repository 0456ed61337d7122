"""MediaWiki wikitext -> plain-text paragraphs (mwparserfromhell), plus the page-level tests the zhwiki
reader needs (redirects, disambiguation pages).

What is kept: running text of every section and list items (each its own line, so each becomes a
sentence or more); link labels; the text inside bold/italic/spans. What is dropped: templates
(infoboxes, citations, navboxes), references, tables, files and images, categories, interlanguage
links, comments, math/code/gallery blocks, section headings, and whole sections that are only
references or links (参考文献, 外部链接, ...). zhwiki's language-conversion markup `-{...}-` is
resolved to simplified Chinese with zhconv before parsing.

Two renderers apply these rules: `render_tree` walks mwparserfromhell's node tree (the reference), and
`render_tokens` walks the tokenizer's output without building the tree (wikitokens.py, about 5x
faster), handing the pages it cannot be sure of to the tree.
"""

from __future__ import annotations

import re

import mwparserfromhell
from mwparserfromhell.nodes import (
    Argument,
    Comment,
    ExternalLink,
    Heading,
    HTMLEntity,
    Tag,
    Template,
    Text,
    Wikilink,
)

from pipelines.corpus import wikitokens

_REDIRECT = re.compile(r"^\s*#\s*(?:redirect|重定向|重新導向|重新导向)", re.IGNORECASE)

# {{...}} names that mark a disambiguation page on zhwiki (and enwiki), compared lowercased.
DISAMBIGUATION_TEMPLATES = frozenset(
    {
        "disambig",
        "disambiguation",
        "dab",
        "disamb",
        "disambig-cleanup",
        "hndis",
        "geodis",
        "numberdis",
        "shipindex",
        "aimai",
        "消歧义",
        "消歧義",
        "消歧义页",
        "消歧義頁",
        "消歧異",
        "地名消歧义",
        "人名消歧义",
    }
)
_DISAMBIG_TEMPLATE = re.compile(
    r"\{\{\s*("
    + "|".join(re.escape(t) for t in sorted(DISAMBIGUATION_TEMPLATES, key=len, reverse=True))
    + r")\s*[|}]",
    re.IGNORECASE,
)
_DISAMBIG_TITLE = re.compile(r"[（(](?:消歧[义義]|disambiguation)[)）]\s*$", re.IGNORECASE)

FILE_NAMESPACES = frozenset(
    {"file", "image", "media", "文件", "檔案", "档案", "图像", "圖像", "媒体", "媒體", "图片", "圖片"}
)
CATEGORY_NAMESPACES = frozenset({"category", "分类", "分類"})
_LANGUAGE_CODE = re.compile(r"^[a-z]{2,3}(?:-[a-z0-9]+)*$|^simple$")

# Tags whose whole content is dropped (not prose, or markup we cannot render as sentences).
DROPPED_TAGS = frozenset(
    {
        "ref",
        "references",
        "table",
        "gallery",
        "math",
        "chem",
        "ce",
        "code",
        "pre",
        "syntaxhighlight",
        "source",
        "score",
        "timeline",
        "graph",
        "mapframe",
        "maplink",
        "imagemap",
        "templatedata",
        "templatestyles",
        "includeonly",
        "hiero",
        "inputbox",
        "categorytree",
        "s",
        "del",
        "style",
        "script",
    }
)
_LINE_BREAK_TAGS = frozenset(
    {"li", "dt", "dd", "br", "p", "div", "hr", "ul", "ol", "dl", "blockquote", "center"}
)

# Sections that hold references, links or navigation only (compared after t2s, without spaces).
DROPPED_SECTIONS = frozenset(
    {
        "参考文献",
        "参考资料",
        "参考来源",
        "参考",
        "注释",
        "注解",
        "脚注",
        "注释与参考",
        "外部链接",
        "外部连结",
        "外部连接",
        "参见",
        "参看",
        "相关条目",
        "延伸阅读",
        "扩展阅读",
        "references",
        "externallinks",
        "seealso",
        "notes",
        "furtherreading",
        "bibliography",
        "sources",
        "footnotes",
    }
)
_SECTION_KEY_T2S = str.maketrans("參資條閱擴釋關連結註腳", "参资条阅扩释关连结注脚")

# zhwiki conversion markup: -{zh-hans:计算机;zh-hant:電腦}- , -{原文}- , -{H|...}- (not `-{{`).
_CONVERSION = re.compile(r"-\{(?!\{).*?\}-", re.DOTALL)
_MAGIC_WORD = re.compile(r"__[A-Z]+__")
_EMPTY_BRACKETS = re.compile(r"[（(][\s,，、;；:：]*[)）]")


def is_redirect(wikitext: str) -> bool:
    """`#REDIRECT [[...]]`, and its localized forms `#重定向`, `#重新導向`."""
    return bool(_REDIRECT.match(wikitext))


def is_disambiguation(title: str, wikitext: str) -> bool:
    """A `{{disambig}}`-family template anywhere on the page, or a `(消歧义)` title."""
    return bool(_DISAMBIG_TITLE.search(title) or _DISAMBIG_TEMPLATE.search(wikitext))


def resolve_conversion_markup(wikitext: str) -> str:
    """Resolve `-{...}-` spans to their zh-cn form with zhconv (only the spans: zhconv is slow)."""
    if "-{" not in wikitext:
        return wikitext
    import zhconv

    return _CONVERSION.sub(lambda m: zhconv.convert_for_mw(m.group(), "zh-cn"), wikitext)


def _section_key(title: str) -> str:
    return re.sub(r"\s+", "", title).lower().translate(_SECTION_KEY_T2S)


def _link_namespace(target: str) -> str:
    return target.split(":", 1)[0].strip().lower() if ":" in target else ""


def _skip_link(target: str, has_text: bool) -> bool:
    """A link that renders nothing: a file or category link (not `[[:Category:X]]`, which is a plain
    link), or an interlanguage link `[[en:Computer]]`. `target` is the stripped link target."""
    if target.startswith(":"):
        return False
    ns = _link_namespace(target)
    return (
        ns in FILE_NAMESPACES
        or ns in CATEGORY_NAMESPACES
        or (not has_text and bool(_LANGUAGE_CODE.match(ns)))
    )


def _dropped_section(title: str) -> bool:
    return _section_key(title) in DROPPED_SECTIONS


_RULES = wikitokens.Rules(DROPPED_TAGS, _LINE_BREAK_TAGS, _skip_link, _dropped_section)


def _render(nodes, out: list[str]) -> None:
    """Append the plain text of `nodes` (a Wikicode's node list) to `out`."""
    for node in nodes:
        if isinstance(node, Text):
            out.append(node.value)
        elif isinstance(node, Wikilink):
            target = str(node.title).strip()
            if _skip_link(target, node.text is not None):
                continue
            if node.text is not None:
                _render(node.text.nodes, out)
            else:
                out.append(target.lstrip(":"))
        elif isinstance(node, Tag):
            tag = str(node.tag).strip().lower()
            if tag in DROPPED_TAGS:
                continue
            if tag in _LINE_BREAK_TAGS:
                out.append("\n")
            if node.contents is not None and not node.self_closing:
                _render(node.contents.nodes, out)
                if tag in _LINE_BREAK_TAGS and tag not in ("li", "dt", "dd"):
                    out.append("\n")
        elif isinstance(node, ExternalLink):
            if node.title is not None:
                _render(node.title.nodes, out)
        elif isinstance(node, HTMLEntity):
            out.append(node.normalize())
        elif isinstance(node, (Template, Argument, Comment)):
            continue
        elif isinstance(node, Heading):
            out.append("\n\n")
        # any other node type (e.g. Parameter) carries no prose


def render_tree(wikitext: str) -> list[str]:
    """The page's text pieces from mwparserfromhell's node tree: the reference renderer, and the one
    used for the pages the token walker (wikitokens.py) leaves to it."""
    code = mwparserfromhell.parse(wikitext)
    out: list[str] = []
    skip_level = 0  # inside a dropped section of this heading level (0: not skipping)
    for node in code.nodes:
        if isinstance(node, Heading):
            if skip_level and node.level > skip_level:
                continue
            skip_level = node.level if _dropped_section(node.title.strip_code()) else 0
            out.append("\n\n")
            continue
        if not skip_level:
            _render([node], out)
    return out


def render_tokens(wikitext: str) -> list[str]:
    """The same pieces as render_tree, from the token stream (about 5x faster on zhwiki pages); the
    tree where the walker cannot be sure to match it."""
    toks = wikitokens.tokenize(wikitext)
    try:
        return wikitokens.render_page(toks, _RULES)
    except (wikitokens.Unsupported, IndexError, KeyError, ValueError):
        # the tree renderer decides: the same text, or the same exception (the record's dead letter)
        return render_tree(wikitext)


def wikitext_to_paragraphs(wikitext: str) -> list[str]:
    """Plain-text lines of a page, in order: paragraphs and list items, one per entry."""
    out = render_tokens(resolve_conversion_markup(wikitext))
    text = _MAGIC_WORD.sub("", "".join(out))
    lines = (_EMPTY_BRACKETS.sub("", line).strip() for line in text.split("\n"))
    return [line for line in lines if line]

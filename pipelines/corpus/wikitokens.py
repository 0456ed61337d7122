"""Render wikitext to plain text straight from mwparserfromhell's token stream, without its node tree.

mwparserfromhell parses in two steps: a C tokenizer turns the page into a flat list of tokens, then a
pure-Python builder turns the tokens into a tree of Node and Wikicode objects. On zhwiki pages the
builder takes about 80% of the parse (one object, one SmartList and several imports per node), and
the tree is only walked once, to render it. This module walks the token list instead and writes what
`wikitext._render` would write for the tree the builder would have built, in the same order.

It handles the constructs prose pages are made of. Where the tree renderer would look at something
this walker does not model (a link target or tag name that is not plain text, a heading title with
markup that decides whether a section is dropped, a token the builder would reject), it raises
`Unsupported` and the caller renders that page from the tree instead: the output is the same either
way, and tests/pipelines/corpus/test_wikitokens.py checks that on every page of the sample.

Token shapes (see mwparserfromhell.parser.builder), with `...` a run of nested nodes:

    TemplateOpen ... [TemplateParamSeparator ... [TemplateParamEquals ...]]* TemplateClose
    ArgumentOpen ... [ArgumentSeparator ...] ArgumentClose
    WikilinkOpen title [WikilinkSeparator ...] WikilinkClose
    ExternalLinkOpen url [ExternalLinkSeparator ...] ExternalLinkClose
    HTMLEntityStart [HTMLEntityNumeric [HTMLEntityHex]] Text HTMLEntityEnd
    HeadingStart(level) ... HeadingEnd
    CommentStart ... CommentEnd
    TagOpenOpen name [TagAttrStart ... [TagAttrEquals [TagAttrQuote] ...]]*
        ( TagCloseSelfclose | TagCloseOpen ... TagOpenClose ... TagCloseClose )
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from html import entities

from mwparserfromhell.parser import tokens as T

try:  # the C tokenizer; mwparserfromhell falls back to its Python one where the extension is missing
    from mwparserfromhell.parser._tokenizer import CTokenizer as _Tokenizer
except ImportError:  # pragma: no cover - the wheel ships the extension
    from mwparserfromhell.parser.tokenizer import Tokenizer as _Tokenizer


class Unsupported(Exception):
    """The page needs the node tree to be rendered exactly; render it with wikitext.render_tree."""


def tokenize(wikitext: str) -> list:
    """The token list mwparserfromhell.parse builds its tree from (same context, style tags parsed)."""
    return _Tokenizer().tokenize(wikitext, 0, False)


@dataclass(frozen=True)
class Rules:
    """What the renderer keeps and drops; wikitext.py owns the values (one place for both renderers)."""

    dropped_tags: frozenset[str]  # lowercased tag names whose content is dropped
    line_break_tags: frozenset[str]  # tag names that break the line
    skip_link: Callable[[str, bool], bool]  # (target, has_text) -> file/category/interlanguage link
    dropped_section: Callable[[str], bool]  # heading title -> drop the section


def render_page(toks: list, rules: Rules) -> list[str]:
    """Top-level nodes of a page -> pieces of text (wikitext._render's `out`), with whole sections
    dropped where their heading says so. Raises Unsupported (see module doc), IndexError on a token
    list that ends inside a construct (the builder raises there too; the caller falls back)."""
    out: list[str] = []
    walker = _Walker(toks, rules)
    skip_level = 0  # inside a dropped section of this heading level (0: not skipping)
    i, count = 0, len(toks)
    while i < count:
        tok = toks[i]
        if type(tok) is T.HeadingStart:
            level = tok["level"]
            i, title = walker.plain_until(i + 1, T.HeadingEnd, need=not (skip_level and level > skip_level))
            i += 1
            if skip_level and level > skip_level:
                continue
            # (the tree passes title.strip_code(): for plain text, the text less its outer newlines,
            # which the section key ignores like all white space)
            skip_level = level if rules.dropped_section(title) else 0
            out.append("\n\n")
            continue
        i = walker.node(i, None if skip_level else out)
    return out


_NO_LINE_AFTER = frozenset({"li", "dt", "dd"})
_ATTR_ENDS = (T.TagAttrStart, T.TagCloseOpen, T.TagCloseSelfclose, T.TagAttrEquals, T.TagAttrQuote)


class _Walker:
    """Consumes nodes from the token list. `out` is the list to render into, or None to consume
    without rendering (a dropped section, a template, a link's target)."""

    def __init__(self, toks: list, rules: Rules):
        self.toks, self.rules = toks, rules
        self.handlers = {
            T.Text: self._text,
            T.TemplateOpen: self._template,
            T.ArgumentOpen: self._argument,
            T.CommentStart: self._comment,
            T.WikilinkOpen: self._wikilink,
            T.ExternalLinkOpen: self._external_link,
            T.HTMLEntityStart: self._entity,
            T.HeadingStart: self._heading,
            T.TagOpenOpen: self._tag,
        }

    def node(self, i: int, out: list | None) -> int:
        """Render the node starting at toks[i]; return the index after it."""
        handler = self.handlers.get(type(self.toks[i]))
        if handler is None:  # a separator or close where a node should start: the builder raises
            raise Unsupported(type(self.toks[i]).__name__)
        return handler(i, out)

    def nodes(self, i: int, out: list | None, ends) -> int:
        """Render nodes from toks[i] up to the first token whose type is in `ends` (a type or tuple of
        types); return its index."""
        toks, handlers = self.toks, self.handlers
        while True:
            tok = toks[i]
            if isinstance(tok, ends):
                return i
            if type(tok) is T.Text:  # most tokens: inline the common case
                if out is not None:
                    out.append(tok["text"])
                i += 1
                continue
            handler = handlers.get(type(tok))
            if handler is None:
                raise Unsupported(type(tok).__name__)
            i = handler(i, out)

    def plain_until(self, i: int, ends, need: bool) -> tuple[int, str]:
        """The text of a run of Text tokens up to a token of type `ends` -> (its index, text). A run
        with any other node is Unsupported when `need`; otherwise it is consumed and "" returned."""
        toks = self.toks
        parts = []
        while type(toks[i]) is T.Text:
            parts.append(toks[i]["text"])
            i += 1
        if isinstance(toks[i], ends):
            return i, "".join(parts)
        if need:
            raise Unsupported("markup in a link target, tag name or heading")
        return self.nodes(i, None, ends), ""

    def _skip(self, i: int, open_type, close_type) -> int:
        """toks[i] opens a construct that renders nothing: index after its matching close. The tokenizer
        nests its constructs properly, so counting this construct's own opens and closes suffices."""
        toks, depth = self.toks, 0
        while True:
            token_type = type(toks[i])
            if token_type is open_type:
                depth += 1
            elif token_type is close_type:
                depth -= 1
                if depth == 0:
                    return i + 1
            i += 1

    def _text(self, i, out):
        if out is not None:
            out.append(self.toks[i]["text"])
        return i + 1

    def _template(self, i, out):
        return self._skip(i, T.TemplateOpen, T.TemplateClose)

    def _argument(self, i, out):
        return self._skip(i, T.ArgumentOpen, T.ArgumentClose)

    def _comment(self, i, out):
        return self._skip(i, T.CommentStart, T.CommentEnd)

    def _heading(self, i, out):
        # a heading below the top level (inside a tag): a paragraph break, its title not rendered
        i = self.nodes(i + 1, None, T.HeadingEnd)
        if out is not None:
            out.append("\n\n")
        return i + 1

    def _entity(self, i, out):
        toks = self.toks
        tok = toks[i + 1]
        if type(tok) is T.HTMLEntityNumeric:
            tok = toks[i + 2]
            if type(tok) is T.HTMLEntityHex:
                base, value, end = 16, toks[i + 3]["text"], i + 4
            else:
                base, value, end = 10, tok["text"], i + 3
        else:
            base, value, end = None, tok["text"], i + 2  # named: &nbsp;
        if type(toks[end]) is not T.HTMLEntityEnd:
            raise Unsupported("entity")
        if out is not None:  # as HTMLEntity.normalize()
            out.append(chr(entities.name2codepoint[value]) if base is None else chr(int(value, base)))
        return end + 1

    def _wikilink(self, i, out):
        toks = self.toks
        i, target = self.plain_until(i + 1, (T.WikilinkSeparator, T.WikilinkClose), need=out is not None)
        has_text = type(toks[i]) is T.WikilinkSeparator
        if has_text:
            text: list[str] | None = [] if out is not None else None
            i = self.nodes(i + 1, text, T.WikilinkClose)
        if out is not None:
            target = target.strip()
            if not self.rules.skip_link(target, has_text):
                if has_text:
                    out.extend(text)
                else:
                    out.append(target.lstrip(":"))
        return i + 1

    def _external_link(self, i, out):
        i = self.nodes(i + 1, None, (T.ExternalLinkSeparator, T.ExternalLinkClose))  # the URL
        if type(self.toks[i]) is T.ExternalLinkSeparator:
            i = self.nodes(i + 1, out, T.ExternalLinkClose)  # the title
        return i + 1

    def _tag(self, i, out):
        toks, rules = self.toks, self.rules
        # the name, then attributes (never rendered) up to the end of the opening tag
        i, name = self.plain_until(i + 1, _ATTR_ENDS, need=out is not None)
        while type(toks[i]) is not T.TagCloseOpen and type(toks[i]) is not T.TagCloseSelfclose:
            i = self.nodes(i + 1, None, _ATTR_ENDS)  # past TagAttrStart/Equals/Quote: the next part
        tag = name.strip().lower()
        keep = out is not None and tag not in rules.dropped_tags
        breaks = keep and tag in rules.line_break_tags
        if breaks:
            out.append("\n")
        if type(toks[i]) is T.TagCloseSelfclose:
            return i + 1
        i = self.nodes(i + 1, out if keep else None, (T.TagOpenClose, T.TagCloseClose))
        if type(toks[i]) is not T.TagOpenClose:
            raise Unsupported("tag closed without contents")  # the tree has contents=None there
        i = self.nodes(i + 1, None, T.TagCloseClose)  # the closing tag's name
        if breaks and tag not in _NO_LINE_AFTER:
            out.append("\n")
        return i + 1

"""The token walker (wikitokens.render_page) against the reference tree renderer (wikitext.render_tree).

The contract: for every input, the walker writes the tree's text, or raises Unsupported (or IndexError,
KeyError, ValueError: render_tokens falls back to the tree on those); where the tree raises, the walker
raises too. Checked on hand-written edge cases (which the walker must render itself), on pages that
must fall back, on seeded random pages made of markup fragments, and on the generated articles the
tests and benchmarks read (dumps.article_wikitext).
"""

from __future__ import annotations

import random

import pytest

from pipelines.corpus import wikitext, wikitokens
from pipelines.corpus.dumps import article_wikitext

FALLBACK = (wikitokens.Unsupported, IndexError, KeyError, ValueError)


def walk(text: str) -> str:
    return "".join(wikitokens.render_page(wikitokens.tokenize(text), wikitext._RULES))


def tree(text: str) -> str:
    return "".join(wikitext.render_tree(text))


def walker_agrees(text: str) -> bool:
    """Assert the contract on one page; True where the walker rendered it itself."""
    try:
        want, tree_error = tree(text), None
    except Exception as e:  # the tree's exception is the record's dead letter: the walker must not hide it
        want, tree_error = None, e
    try:
        got = walk(text)
    except FALLBACK:
        if tree_error is None:
            assert "".join(wikitext.render_tokens(text)) == want, text
        else:
            with pytest.raises(type(tree_error)):
                wikitext.render_tokens(text)
        return False
    assert tree_error is None, f"the tree raised {tree_error!r} where the walker rendered {text!r}"
    assert got == want, text
    return True


# (name, wikitext, the text both renderers write): each rendered by the walker, without falling back
HANDLED = [
    ("empty", "", ""),
    ("text only", "北京是中国的首都。", "北京是中国的首都。"),
    ("nested tags", "<div><span>甲<small>乙</small></span>丙</div>", "\n甲乙丙\n"),
    ("br self-closing", "甲<br/>乙", "甲\n乙"),
    ("br void", "甲<br>乙", "甲\n乙"),
    ("br closing form", "甲</br>乙", "甲\n乙"),
    ("br uppercase", "甲<BR />乙", "甲\n乙"),
    ("ref self-closing", "甲<ref name=a/>乙", "甲乙"),
    ("ref with cite", "甲<ref>见{{cite web|url=http://x|title=[[y]]}}</ref>乙", "甲乙"),
    ("ref named", '甲<ref name="a">来源</ref>乙', "甲乙"),
    ("template in attribute", '<span style="{{x}}">t</span>', "t"),
    ("link in attribute", '<span title="[[a|b]]">t</span>', "t"),
    ("unclosed div", "<div>未闭合", "<div>未闭合"),
    ("unclosed span", "甲<span>乙", "甲<span>乙"),
    ("unclosed li", "<li>甲", "\n甲"),
    ("closed li", "<li>甲</li>乙", "\n甲乙"),
    ("uppercase tag", "<DIV>甲</DIV >乙", "\n甲\n乙"),
    ("bold and italic", "'''粗'''与''斜''", "粗与斜"),
    ("bold italic", "'''''粗斜'''''", "粗斜"),
    ("unbalanced quotes", "'''未平衡''", "'未平衡"),
    ("mixed quotes", "''a'''b''c'''", "a'''bc'''"),
    ("stray quotes", "'甲''", "'甲''"),
    ("lists", "* 甲\n# 乙\n#* 丙", "\n 甲\n\n 乙\n\n\n 丙"),
    ("definition one line", ";术语:定义", "\n术语\n定义"),
    ("definition two lines", ";术语\n:定义", "\n术语\n\n定义"),
    ("explicit definition list", "<dl><dt>术语</dt><dd>定义</dd></dl>", "\n\n术语\n定义\n"),
    ("paragraph tags", "<p>段一</p><p>段二", "\n段一\n<p>段二"),
    ("blockquote", "<blockquote>引</blockquote>后", "\n引\n后"),
    ("heading top level", "前言\n== 历史 ==\n正文", "前言\n\n\n\n正文"),
    ("heading in div", "<div>\n== 内部 ==\n</div>后", "\n\n\n\n\n\n后"),
    ("heading in ref", "甲<ref>\n== 标题 ==\n</ref>乙", "甲乙"),
    (
        "dropped sections",
        "正文\n== 参考文献 ==\n* 书\n=== 子节 ===\n* 书2\n== 外部链接 ==\n* 链接\n== 历史 ==\n保留",
        "正文\n\n\n\n\n\n\n\n保留",
    ),
    (
        "dropped english",
        "正文\n== References ==\n* x\n==== Deep ====\ny\n== 历史 ==\n留",
        "正文\n\n\n\n\n\n留",
    ),
    ("dropped traditional", "正文\n== 參考資料 ==\n* 书\n== 历史 ==\n留", "正文\n\n\n\n\n\n留"),
    ("higher heading ends drop", "正文\n=== 参考 ===\n丢\n== 历史 ==\n留", "正文\n\n\n\n\n\n留"),
    ("entities", "&nbsp;&#20013;&#x4E2D;&amp;&lt;", "\xa0中中&<"),
    ("non-entities", "&bogus; &#; &apos; &#x110000; &nbsp", "&bogus; &#; &apos; &#x110000; &nbsp"),
    ("external link titled", "见[http://example.org 网站]。", "见网站。"),
    ("external link untitled", "见[http://example.org]。", "见。"),
    ("bare url", "见 http://example.org/a 。", "见  。"),
    ("external link rich title", "[http://example.org ''斜''与[[链]]]", "斜与链"),
    ("wikilinks", "[[北京]]与[[北京市|北京]]", "北京与北京"),
    ("link empty label", "[[北京|]]", ""),
    ("colon category", "[[:Category:X]]", "Category:X"),
    ("colon interlanguage", "[[:en:Foo]]", "en:Foo"),
    ("category", "[[Category:X]][[分类:城市]]", ""),
    ("file with caption link", "[[File:a.jpg|thumb|cap [[link]]]]", ""),
    ("file localized", "[[文件:a.png|图]]", ""),
    ("interlanguage", "[[en:Foo]]", ""),
    ("interlanguage label", "[[en:Foo|label]]", "label"),
    ("template in label", "[[北京|{{lang|zh|北京}}市]]", "市"),
    ("link in label", "[[a|b [[c]] d]]", "b c d"),
    ("comment", "甲<!-- 注释 -->乙", "甲乙"),
    ("unclosed comment", "甲<!-- 未闭合", "甲<!-- 未闭合"),
    ("argument", "甲{{{arg|default}}}乙", "甲乙"),
    ("nested templates", "甲{{a|{{b|[[c|d]]}}|e=f}}乙", "甲乙"),
    ("table", '前\n{| class="wikitable"\n|-\n! 项 !! 值\n|-\n| 甲 || 1\n|}\n后', "前\n\n后"),
    ("magic word", "__TOC__正文", "__TOC__正文"),  # removed later, by wikitext_to_paragraphs
    ("nowiki", "<nowiki>[[x]]</nowiki>", "[[x]]"),
    ("pre", "甲<pre>代码</pre>乙", "甲乙"),
    ("math", "甲<math>x^2</math>乙", "甲乙"),
    ("gallery", "甲<gallery>a.jpg|x</gallery>乙", "甲乙"),
    ("horizontal rule", "甲\n----\n乙", "甲\n\n\n乙"),
    ("malformed link", "[[foo", "[[foo"),
    ("malformed template", "{{foo", "{{foo"),
    ("stray closers", "甲]]乙}}丙", "甲]]乙}}丙"),
    # the tokenizer makes a tag only from a plain name: a template there leaves the whole thing text
    ("tag name from template", "<{{x}}>a</{{x}}>", "<>a</>"),
    ("template after tag name", "<div{{x}}>a</div>", "<div>a</div>"),
]


@pytest.mark.parametrize(("text", "want"), [c[1:] for c in HANDLED], ids=[c[0] for c in HANDLED])
def test_walker_renders_edge_cases_like_the_tree(text, want):
    assert tree(text) == want
    assert walk(text) == want  # no fallback: render_page returns
    assert "".join(wikitext.render_tokens(text)) == want


# (name, wikitext, wikitext_to_paragraphs of it): the walker cannot be sure of these, the tree decides
FALLS_BACK = [
    ("link in heading", "正文\n== [[A|B]] ==\n段落", ["正文", "段落"]),
    # a template strips to nothing: the section is kept
    ("template heading", "== {{lang|en|Notes}} ==\n* 注\n== 历史 ==\n留", ["注", "留"]),
    # the stripped titles are 参考文献 and 注释: those sections are dropped
    ("comment in heading", "正文\n== 参考文献<!-- 注 --> ==\n* 书\n== 历史 ==\n留", ["正文", "留"]),
    ("bold heading", "正文\n== '''注释''' ==\n* 注\n== 历史 ==\n留", ["正文", "留"]),
    ("entity in heading", "== A&amp;B ==\n段", ["段"]),
    # a heading that may end a dropped section
    ("template heading after drop", "正文\n== 参考文献 ==\n丢\n== {{x}}历史 ==\n留", ["正文", "留"]),
    # the tree writes the target's source text, template and all
    ("template link target", "甲[[{{x}}]]乙", ["甲{{x}}乙"]),
    ("entity in link target", "见[[A&amp;B]]。", ["见A&amp;B。"]),
    ("comment in link target", "见[[北京<!-- x -->|北京]]。", ["见北京。"]),
]


@pytest.mark.parametrize(("text", "want"), [c[1:] for c in FALLS_BACK], ids=[c[0] for c in FALLS_BACK])
def test_walker_leaves_unsure_pages_to_the_tree(text, want, monkeypatch):
    with pytest.raises(wikitokens.Unsupported):
        walk(text)
    assert wikitext.wikitext_to_paragraphs(text) == want
    monkeypatch.setattr(wikitext, "render_tokens", wikitext.render_tree)
    assert wikitext.wikitext_to_paragraphs(text) == want


# Random pages: fragments of the cases above, prose, line breaks, heading lines and lone markup
# characters, so that constructs nest, interleave and break off at random.
PROSE = ["北京是中国的首都。", "它有悠久的历史，", "气候温和", "abc ", "\n", "\n\n", " "]
HEADING_LINES = ["\n== 历史 ==\n", "\n=== 子节 ===\n", "\n== 参考文献 ==\n", "\n= 顶 =\n", "==", "\n==\n"]
SINGLE = list("[]{}|<>'=&;:*#!-/")
POOL = [c[1] for c in HANDLED] + PROSE + HEADING_LINES + SINGLE
FUZZ_PAGES = 800


def fuzz_page(rng: random.Random) -> str:
    parts = [rng.choice(POOL) for _ in range(rng.randint(1, 30))]
    if rng.random() < 0.1:  # some pages also get a construct that must fall back
        parts.insert(rng.randint(0, len(parts)), rng.choice(FALLS_BACK)[1])
    return "".join(parts)


def test_walker_matches_the_tree_on_random_pages():
    rng = random.Random(13)
    handled = sum(walker_agrees(fuzz_page(rng)) for _ in range(FUZZ_PAGES))
    # the walker must do the work, not hand every page to the tree (measured: 92% rendered)
    assert handled >= 0.8 * FUZZ_PAGES


def test_walker_matches_the_tree_on_generated_articles(sample_docs):
    arts = [a for a in sample_docs if a["sentences"]][:60]
    for a in arts:
        page = article_wikitext(a["title"], a["sentences"])
        assert walker_agrees(page)
        assert walker_agrees(wikitext.resolve_conversion_markup(page))  # what the pipeline renders
    paragraphs = wikitext.wikitext_to_paragraphs(article_wikitext(arts[0]["title"], arts[0]["sentences"]))
    assert arts[0]["sentences"][-1] in "".join(paragraphs)

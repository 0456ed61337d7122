from pipelines.corpus.wikitext import (
    is_disambiguation,
    is_redirect,
    resolve_conversion_markup,
    wikitext_to_paragraphs,
)

PAGE = """{{Infobox 城市|名称=北京}}'''北京'''是中国的首都。<ref>{{cite web|url=http://x}}</ref>它有悠久的历史。
[[File:Beijing.jpg|thumb|北京的风景]]
{| class="wikitable"
|-
| 人口 || 2000万
|}
== 地理 ==
北京位于[[华北平原|华北]]北部。
* 第一条：气候温和。
* 第二条：四季分明。
<!-- 注释 -->
== 参考文献 ==
{{reflist}}
* 书目一。
=== 子节 ===
* 书目二。
== 历史 ==
北京有三千年建城史。&nbsp;[http://example.org 外部网站]
[[Category:城市]]
[[分类:首都]]
[[en:Beijing]]
"""


def test_wikitext_keeps_prose_and_list_items_drops_markup():
    lines = wikitext_to_paragraphs(PAGE)
    assert lines == [
        "北京是中国的首都。它有悠久的历史。",
        "北京位于华北北部。",
        "第一条：气候温和。",
        "第二条：四季分明。",
        "北京有三千年建城史。\xa0外部网站",
    ]
    text = "\n".join(lines)
    for gone in (
        "Infobox",
        "cite",
        "人口",
        "Beijing.jpg",
        "风景",
        "城市",
        "首都]]",
        "Beijing",
        "书目",
        "注释",
        "==",
    ):
        assert gone not in text


def test_conversion_markup_resolved_to_simplified():
    assert resolve_conversion_markup("-{zh-hans:计算机;zh-hant:電腦}-是工具") == "计算机是工具"
    assert wikitext_to_paragraphs("这是-{zh-hans:内存;zh-tw:記憶體}-。") == ["这是内存。"]
    assert resolve_conversion_markup("{{模板}}-{{另一个}}") == "{{模板}}-{{另一个}}"  # not markup


def test_inline_links_keep_their_label():
    assert wikitext_to_paragraphs("见[[:en:Foo]]与[[Bar|巴]]。") == ["见en:Foo与巴。"]


def test_redirects_including_localized():
    assert is_redirect("#REDIRECT [[Computer accessibility]]")
    assert is_redirect("#redirect[[x]]")
    assert is_redirect("  #重定向 [[北京市]]")
    assert is_redirect("#重新導向 [[北京市]]")
    assert not is_redirect("正文 #重定向")


def test_disambiguation_by_template_or_title():
    assert is_disambiguation("苹果", "'''苹果'''可以指：\n{{disambig}}")
    assert is_disambiguation("苹果", "{{消歧義|水果}}")
    assert is_disambiguation("苹果 (消歧义)", "")
    assert not is_disambiguation("苹果", "{{Infobox 水果}}苹果是一种水果。")

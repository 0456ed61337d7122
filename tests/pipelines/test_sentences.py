from pipelines.sentences import split_paragraphs, split_sentences


def test_chinese_terminators_keep_closing_quotes():
    assert split_sentences("他说：“我们赢了！”大家都笑了。真的吗？是的；当然……好") == [
        "他说：“我们赢了！”",
        "大家都笑了。",
        "真的吗？",
        "是的；",
        "当然……",
        "好",
    ]


def test_latin_sentences_and_abbreviations():
    assert split_sentences("Dr. Smith went home. He slept! Did he? Yes 3.14 is pi.") == [
        "Dr. Smith went home.",
        "He slept!",
        "Did he?",
        "Yes 3.14 is pi.",
    ]


def test_overlong_sentences_split_at_commas_then_hard_limit():
    long = "，".join(["这是一个分句"] * 10) + "。"
    parts = split_sentences(long, max_chars=20)
    assert all(len(p) <= 20 for p in parts)
    assert "".join(parts) == long
    assert split_sentences("一" * 45, max_chars=20) == ["一" * 20, "一" * 20, "一" * 5]


def test_whitespace_normalized_and_empty_dropped():
    assert split_sentences("  \n ") == []
    assert split_sentences("第一句。\n  第二句。") == ["第一句。", "第二句。"]


def test_split_paragraphs_flattens_in_order():
    assert split_paragraphs(["第一段。第二句！", "", "第三句"], max_chars=100) == [
        "第一段。",
        "第二句！",
        "第三句",
    ]

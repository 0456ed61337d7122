"""The planted set of benchmarks/pii.py: deterministic, every planted value of the right format and at
its gold span, look-alikes carrying no gold, and the evaluation counting what it should."""

from __future__ import annotations

from benchmarks import pii as bench
from pipelines.corpus import pii

FILLERS = [
    "新年伊始，各地群众喜迎佳节。",
    "这是一个普通的句子，没有数字。",
    "会议在北京举行，代表们发言踊跃。",
]


def test_the_planted_set_is_deterministic_and_its_gold_spans_hold_the_values():
    items = bench.planted_set(seed=3, fillers=FILLERS)
    assert items == bench.planted_set(seed=3, fillers=FILLERS)
    assert items != bench.planted_set(seed=4, fillers=FILLERS)
    assert sum(1 for i in items if i.gold) == sum(bench.POSITIVES.values())
    assert sum(1 for i in items if not i.gold) == bench.LOOKALIKES_EACH * len(bench.LOOKALIKES)
    for item in items:
        for m in item.gold:
            value = item.text[m.start : m.end]
            if m.kind == "id_number":
                assert pii.is_id_number(value.replace(" ", "").replace("-", ""))
            if m.kind == "bank_card":  # (is_bank_card may still refuse one: docs/pii.md)
                digits = value.replace(" ", "").replace("-", "")
                assert pii.luhn_ok(digits) and 16 <= len(digits) <= 19 and digits[0] in pii.CARD_PREFIXES


def test_evaluate_counts_precision_recall_and_lookalike_hits():
    text = "电话13812345678。"
    items = [
        bench.Planted(text, [pii.Match("mobile", 2, 13)], "mobile"),
        bench.Planted("邮箱a@b.cn。", [pii.Match("email", 2, 8)], "email"),
        bench.Planted("他的QQ12345没有写全。", [pii.Match("qq", 4, 9)], "qq"),  # found: recall counted
        bench.Planted("订单" + text, [], "long_number"),  # a look-alike that is (wrongly) touched
    ]
    q = bench.evaluate(items)
    assert q["per_kind"]["mobile"] == {"gold": 1, "found": 2, "correct": 1, "precision": 0.5, "recall": 1.0}
    assert q["per_kind"]["email"]["recall"] == 1.0
    assert q["per_kind"]["ipv6"]["precision"] is None
    assert q["lookalikes"]["long_number"]["touched"] == 1
    assert q["all"]["gold"] == 3


def test_scrubbing_the_planted_set_twice_changes_nothing_more():
    items = bench.planted_set(seed=1, fillers=FILLERS)
    once = pii.scrub([i.text for i in items])
    assert sum(once.counts.values()) >= sum(bench.POSITIVES.values())
    assert pii.scrub(once.lines) == pii.Scrubbed(once.lines, {}, False)

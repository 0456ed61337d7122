"""A 50 MB single document (as one text document and as one JSON line): read with bounded memory,
dropped as too_long with its reason, and the rest of the corpus goes on."""

from __future__ import annotations

import json
import os

from flows.cli import main

NORMAL = [
    "今天北京天气晴朗，气温回升，市民纷纷走出家门参加户外活动。",
    "专家表示，这样的天气还将持续一周左右，请大家注意防晒。",
]


def test_fifty_megabyte_documents(tmp_path):
    sentence = "这是一个非常长的文档中的一句话，它被重复了很多很多次。"  # 27 characters, 81 bytes
    repeats = 50_000_000 // len(sentence.encode())
    text = tmp_path / "big.txt"
    with open(text, "w", encoding="utf-8") as f:
        f.write("\n".join(NORMAL) + "\n\n")
        f.write("\n".join([sentence] * repeats) + "\n")
    news = tmp_path / "big.json"
    with open(news, "w", encoding="utf-8") as f:
        f.write(
            json.dumps({"news_id": "big", "title": "大", "content": sentence * repeats}, ensure_ascii=False)
            + "\n"
        )
        f.write(
            json.dumps({"news_id": "ok", "title": "小", "content": "\n".join(NORMAL)}, ensure_ascii=False)
            + "\n"
        )
    assert os.path.getsize(text) > 50_000_000 and os.path.getsize(news) > 50_000_000
    out = str(tmp_path / "out")
    code = main(
        [
            "corpus",
            "--source",
            f"text:{text}",
            "--source",
            f"news2016zh:{news}",
            "--out",
            out,
            "--direct_running_mode",
            "in_memory",
        ]
    )
    assert code == 0
    stats = json.load(open(os.path.join(out, "stats.json")))
    assert stats["read"] == 4 and stats["invariant"]["holds"]
    assert stats["dropped"] == {"too_long": 2, "exact_duplicate": 1}  # the two normal copies are one text
    assert stats["kept"] == 1

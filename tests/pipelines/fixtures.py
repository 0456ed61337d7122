"""Texts shared by the tokenizer and normalization tests: scripts, widths and spacing mixed."""

from __future__ import annotations

MIXED = [
    "我用NLP模型，在2019年 Hello world! 做测试。",
    "e.g. The U.S. economy grew 3.14% in 1998 ",
    "龘龘 abc  def  ghi",
    "ｘｙｚ 中 文 ok",
    "a",
    "。”",
]

"""`albert bench tokenize` runs and reports both paths side by side (figures are not asserted)."""

from __future__ import annotations

import re

from benchmarks.tokenize import main


def test_bench_tokenize_prints_both_paths_and_full_parity(capsys):
    assert main(["--docs", "40", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    for row in ("normalize", "segment", "together", "pieces per character"):
        assert re.search(rf"^{row}\s+\S+\s+\S+\s+\d+\.\d+$", out, re.M), row
    same, total = map(
        lambda x: int(x.replace(",", "")), re.search(r"compiled: ([\d,]+)/([\d,]+)", out).groups()
    )
    assert same == total > 500

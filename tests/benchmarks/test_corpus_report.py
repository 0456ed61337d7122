"""benchmarks/corpus_report.py: the shard it reads is deterministic and of the stage's format, and it
measures every step (figures are printed, never asserted)."""

from __future__ import annotations

from benchmarks import corpus_report as bench
from pipelines.corpus.report import REPORT, examples_by_reason, rejected_records


def test_the_rejected_shard_is_deterministic_and_readable(tmp_path):
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        bench.rejected_shard(str(tmp_path / name / "rejected-00000-of-00001.jsonl.gz"), 300)
    first = (tmp_path / "a" / "rejected-00000-of-00001.jsonl.gz").read_bytes()
    assert (tmp_path / "b" / "rejected-00000-of-00001.jsonl.gz").read_bytes() == first
    records = list(rejected_records(str(tmp_path / "a")))
    assert len(records) == 300 and {r["reason"] for r in records} == set(bench.REASONS)
    assert [r["id"] for r in records] == sorted(r["id"] for r in records)
    assert all(len(v) == 3 for v in examples_by_reason(records).values())


def test_measure_times_every_step():
    result = bench.measure(240)
    assert result["records"] == 240 and result["html_bytes"] > 0
    assert list(result["seconds"]) == ["read", "examples (shard order)", "examples (shuffled)", "render"]
    table = bench.format_table(result)
    assert "seconds per million records" in table and REPORT in table

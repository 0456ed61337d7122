"""The People's Daily reader on the bundled sample."""

from __future__ import annotations

from pipelines.corpus import sources


def test_peoples_daily_sample_reader():
    import itertools

    recs = list(itertools.islice(sources.read_peoples_daily({"kind": "peoples-daily", "path": ""}), 3))
    assert [r["id"] for r in recs] == [f"peoples-daily:199801.txt:199801-0000{i}" for i in range(3)]
    assert recs[0]["text"].startswith(recs[0]["title"]) and recs[0]["markup"] == "plain"

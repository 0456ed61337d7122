"""The text reader: documents between blank lines, broken ones dead-lettered."""

from __future__ import annotations

from pipelines.corpus import sources
from tests.pipelines.corpus.fixtures import _read_all, write_text


def test_text_documents_with_broken_ones(tmp_path):
    path = str(tmp_path / "t.txt")
    write_text(
        path,
        [["第一句。", "第二句。"], ["另一篇。"]],
        raw=b"\xc3\x28 bad\n\n\xe6\x9c\x80\xe5\x90\x8e\xe3\x80\x82\n",
    )
    recs = _read_all(sources.plan_sources([f"text:{path}"]))
    assert [r.get("text") or r["error"] for r in recs] == [
        "第一句。\n第二句。",
        "另一篇。",
        "invalid_utf8",
        "最后。",
    ]
    assert recs[0]["id"].startswith("text:") and recs[0]["id"] != recs[1]["id"]

"""The JSON-lines reader (wiki2019zh, news2016zh): formats, broken and oversized lines, ids."""

from __future__ import annotations

import json

from pipelines.corpus import sources
from tests.pipelines.corpus.fixtures import OPTS, _read_all, write_jsonl


def test_jsonl_formats_and_broken_lines(tmp_path):
    path = str(tmp_path / "wiki.json")
    write_jsonl(
        path,
        [{"id": "53", "url": "u", "title": "经济学", "text": "经济学\n\n经济学是一门学科。"}],
        raw_lines=[b"", b'{"id": "1", "title": ', b'{"id": "2", "text": "\xff"}', b'{"id": "3"}', b"[1, 2]"],
    )
    recs = _read_all(sources.plan_sources([f"wiki2019zh:{path}"]))
    assert recs[0]["id"] == "wiki2019zh:wiki.json:53" and recs[0]["text"] == "\n经济学是一门学科。"
    assert [r["error"] for r in recs[1:]] == [
        "malformed_json",
        "invalid_utf8",
        "missing_field",
        "missing_field",
    ]
    assert all(r["where"].startswith(path + ":") for r in recs)


def test_jsonl_without_native_id_gets_content_hash_and_gz_is_transparent(tmp_path):
    import gzip

    path = str(tmp_path / "news.json.gz")
    with gzip.open(path, "wb") as f:
        f.write(json.dumps({"title": "t", "content": "同样的内容。"}, ensure_ascii=False).encode() + b"\n")
    (rec,) = _read_all(sources.plan_sources([f"news2016zh:{path}"]))
    assert rec["id"].startswith("news2016zh:") and len(rec["id"]) == len("news2016zh:") + 16


def test_oversized_json_line_is_skipped(tmp_path):
    path = str(tmp_path / "news.json")
    write_jsonl(
        path,
        [
            {"news_id": "a", "content": "短。"},
            {"news_id": "b", "content": "长" * 50_000},
            {"news_id": "c", "content": "短。"},
        ],
    )
    recs = _read_all(sources.plan_sources([f"news2016zh:{path}"]), OPTS.replace(max_record_bytes=10_000))
    assert [r.get("id") or r["error"] for r in recs] == [
        "news2016zh:news.json:a",
        "record_too_large",
        "news2016zh:news.json:c",
    ]

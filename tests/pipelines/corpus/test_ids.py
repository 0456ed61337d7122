"""Document ids (pipelines/corpus/readers/ids.py): different documents are never merged by id. The
same native id in two files is two documents; only the same text is a duplicate; an id repeated in
one file keeps the first in file order."""

from __future__ import annotations

import gzip
import json
import os

from flows.cli import main
from pipelines.corpus import sources
from pipelines.corpus.readers.ids import file_names
from tests.pipelines.corpus.test_pipeline import BODY, _raw, _run_stage_on

BEAM = ["--direct_running_mode", "in_memory", "--direct_num_workers", "1"]


def test_file_names_tell_every_input_apart():
    assert file_names(["/d/news_train.json", "/d/news_valid.json"]) == {
        "/d/news_train.json": "news_train.json",
        "/d/news_valid.json": "news_valid.json",
    }
    # wiki2019zh: wiki_zh/AA/wiki_00, wiki_zh/AB/wiki_00, ...
    paths = ["/raw/wiki_zh/AA/wiki_00", "/raw/wiki_zh/AA/wiki_01", "/raw/wiki_zh/AB/wiki_00"]
    assert file_names(paths) == {
        "/raw/wiki_zh/AA/wiki_00": "AA/wiki_00",
        "/raw/wiki_zh/AA/wiki_01": "wiki_01",
        "/raw/wiki_zh/AB/wiki_00": "AB/wiki_00",
    }
    # a path that is the tail of another still gets a name of its own
    names = file_names(["a/x.json", "/b/a/x.json", "gs://bucket/x.json"])
    assert len(set(names.values())) == 3 and names["a/x.json"] == "a/x.json"


def _write(path, rows):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for news_id, text in rows:
            f.write(json.dumps({"news_id": news_id, "title": "", "content": text}, ensure_ascii=False) + "\n")


def _lines(out, prefix):
    return [
        json.loads(line)
        for name in sorted(os.listdir(out))
        if name.startswith(prefix)
        for line in gzip.open(os.path.join(out, name), "rt", encoding="utf-8")
    ]


def test_same_news_id_in_two_files_is_two_documents(tmp_path, sample_docs):
    """The issue's two news2016zh files that reuse news ids: different articles are all kept, the
    same article twice is an exact duplicate; two files of one name in two folders too."""
    texts = ["\n".join(d["sentences"]) for d in sample_docs if sum(map(len, d["sentences"])) > 200][:25]
    a, b = texts[:10], texts[10:20]
    _write(str(tmp_path / "x" / "news.json"), [(f"n{i}", t) for i, t in enumerate(a)])
    # the same ids: five other articles, then five of the first file's articles again
    _write(str(tmp_path / "y" / "news.json"), [(f"n{i}", t) for i, t in enumerate(b[:5] + a[5:])])
    items = sources.plan_sources([f"news2016zh:{tmp_path}/*/news.json"])
    assert [i["name"] for i in items] == ["x/news.json", "y/news.json"]
    out = str(tmp_path / "out")
    assert main(["corpus", "--source", f"news2016zh:{tmp_path}/*/news.json", "--out", out, *BEAM]) == 0
    kept = {d["id"]: "".join(d["sentences"]) for d in _lines(out, "docs-")}
    assert len(kept) == 15
    assert {i for i in kept if i.startswith("news2016zh:x/news.json:")} == {
        f"news2016zh:x/news.json:n{i}" for i in range(10)
    }
    assert {i for i in kept if i.startswith("news2016zh:y/news.json:")} == {
        f"news2016zh:y/news.json:n{i}" for i in range(5)
    }
    rejected = _lines(out, "rejected-")
    assert sorted((r["id"], r["reason"]) for r in rejected) == [
        (f"news2016zh:y/news.json:n{i}", "exact_duplicate") for i in range(5, 10)
    ]  # fmt: skip
    stats = json.load(open(os.path.join(out, "stats.json")))
    assert "duplicate_id" not in stats["dropped"]
    assert stats["read"] == 20 and stats["files"] == {}  # (per file: dumps with an index, and losses)


def test_an_id_repeated_in_one_file_keeps_the_first_in_file_order(tmp_path):
    """Which copy survives does not depend on the texts (their hashes) nor on the order records
    arrive in: the first in the file is kept, the positions compared as numbers (95 before 150)."""
    first = BODY
    other = "上海今天举行了国际电影节开幕式，来自世界各地的电影人齐聚一堂，共同庆祝电影艺术的发展。"
    second = other + "\n" + other[::-1]
    for a, b, arrive in ((first, second, 1), (second, first, -1)):  # either text's hash is smaller
        records = [
            {**_raw("news2016zh:f.json:n1", a), "where": "f.json:95"},
            {**_raw("news2016zh:f.json:n1", b), "where": "f.json:150"},
        ][::arrive]
        kept, rejected = _run_stage_on(records, str(tmp_path / f"o{arrive}"))
        assert ["".join(d["sentences"]) for d in kept] == [a.replace("\n", "")]
        (r,) = rejected
        assert r["reason"] == "duplicate_id" and r["where"] == "f.json:150" and "f.json:95" in r["detail"]

"""TestPipeline tests of the read, clean, finalize and write transforms (in-memory DirectRunner)."""

import gzip
import json
import os

import apache_beam as beam
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.util import assert_that, equal_to

from pipelines.corpus import finalize
from pipelines.corpus import pipeline as cp
from pipelines.corpus.options import CorpusOptions
from pipelines.corpus.sources import plan_sources
from tests.pipelines.corpus.fixtures import page_xml, write_dump

ARGS = ["--runner=DirectRunner", "--direct_running_mode=in_memory"]
OPTS = CorpusOptions()
BODY = "今天北京天气晴朗，气温回升，市民纷纷走出家门参加户外活动。专家表示，这样的天气还将持续一周左右，请注意防晒。"


def _raw(doc_id, text, **extra):
    return {
        "source": "text",
        "id": doc_id,
        "title": "",
        "url": "",
        "text": text,
        "markup": "plain",
        "where": doc_id,
        **extra,
    }


def test_read_sources_spreads_multistream_ranges(tmp_path):
    dump = str(tmp_path / "zhwiki-1-pages-articles-multistream.xml.bz2")
    write_dump(dump, [page_xml(i, f"条目{i}", BODY) for i in range(1, 251)], multistream=True)
    opts = OPTS.replace(wiki_streams_per_range=1)
    with BeamTestPipeline(argv=ARGS) as p:
        read = p | cp.ReadSources(plan_sources([f"zhwiki:{dump}"]), opts)
        ids = read[cp.RECORDS] | beam.Map(lambda r: r["id"])
        name = "zhwiki:zhwiki-1-pages-articles-multistream.xml.bz2"
        assert_that(ids, equal_to([f"{name}:{i}" for i in range(1, 251)]))


def test_clean_documents_tags_outputs_and_dead_letters_failures(tmp_path):
    records = [
        _raw("text:good", BODY),
        _raw("text:short", "太短。"),
        {"source": "text", "where": "f:3", "error": "malformed_json", "detail": "x", "raw": "{"},
        {"source": "text", "id": "text:broken", "markup": "plain", "where": "f:9"},  # no "text": raises
    ]
    with BeamTestPipeline(argv=ARGS) as p:
        out = p | beam.Create(records) | cp.CleanDocuments(OPTS, str(tmp_path / "spill"))
        assert_that(out[cp.DOCS] | "ids" >> beam.Keys(), equal_to(["text:good"]), label="docs")
        assert_that(out[cp.HASHES] | "hv" >> beam.Values(), equal_to(["text:good"]), label="hashes")
        assert_that(out[cp.HANDLES] | "sk" >> beam.Keys(), equal_to(["text:good"]), label="handles")
        assert_that(
            out[cp.REJECTED] | beam.Map(lambda r: (r["id"], r["reason"], r["dead_letter"])),
            equal_to(
                [
                    ("text:short", "too_short", False),
                    (None, "malformed_json", True),
                    ("text:broken", "processing_error", True),
                ]
            ),
            label="rejected",
        )
    # the document's text went to a spill file, and its reference points at it
    spills = sorted(os.listdir(tmp_path / "spill"))
    assert [name.rsplit(".", 1)[1] for name in spills] == ["jsonl", "sig"]  # one spill file
    (doc,) = [json.loads(line) for line in open(tmp_path / "spill" / spills[0], encoding="utf-8")]
    assert doc["id"] == "text:good" and doc["lines"] == [BODY]
    assert os.path.getsize(tmp_path / "spill" / spills[1]) == OPTS.dedup.num_perm * 4  # its signature


def _run_stage_on(records, out_dir, opts=OPTS):
    """The whole stage from raw records (build_pipeline after ReadSources): kept docs, rejected."""
    tmp = os.path.join(out_dir, cp.TMP_DIR)
    with BeamTestPipeline(argv=ARGS) as p:
        cleaned = p | beam.Create(records) | cp.CleanDocuments(opts, os.path.join(tmp, "spill"))
        cp.finish_stage(cleaned, out_dir, opts)

    def read(prefix):
        return [
            json.loads(line)
            for name in sorted(os.listdir(out_dir))
            if name.startswith(prefix)
            for line in gzip.open(os.path.join(out_dir, name), "rt", encoding="utf-8")
        ]

    return read("docs-"), read("rejected-")


def test_deduplicate_end_to_end_on_documents(tmp_path):
    other = "上海今天举行了国际电影节开幕式，来自世界各地的电影人齐聚一堂，共同庆祝电影艺术的发展。"
    boiler = "本栏目由本报记者综合报道整理"
    records = [
        _raw("text:b", BODY + "\n" + boiler),
        _raw("text:a", BODY + "\n" + boiler),  # exact duplicate of text:b
        _raw("text:c", other + "\n" + boiler + "\n补充说明：活动将持续七天，欢迎市民前往观看。"),
        _raw(
            "text:d",
            "广州的早茶文化历史悠久，虾饺、烧卖和肠粉深受食客喜爱，每到周末茶楼里座无虚席。\n" + boiler,
        ),
    ]
    kept, rejected = _run_stage_on(records, str(tmp_path / "out"))
    # the boilerplate line (in 3 surviving documents) is gone from all of them, which leaves
    # text:d under min_chars
    assert [(d["id"], any("本栏目" in s for s in d["sentences"])) for d in kept] == [
        ("text:a", False),
        ("text:c", False),
    ]
    assert sorted((r["id"], r["reason"], r["detail"]) for r in rejected) == [
        ("text:b", "exact_duplicate", "duplicate of text:a"),
        ("text:d", "too_short_after_line_dedup", ""),
    ]


def test_duplicate_ids_keep_one_document(tmp_path):
    """Two records under one id: the same text is an exact duplicate, another text a duplicate id;
    one document is kept whichever order they come in, and no text is lost from the accounting."""
    other = "上海今天举行了国际电影节开幕式，来自世界各地的电影人齐聚一堂，共同庆祝电影艺术的发展。"
    records = [
        {**_raw("text:x", BODY), "where": "f:1"},
        {**_raw("text:x", BODY), "where": "f:2"},
        {**_raw("text:x", other + "\n" + other[::-1]), "where": "f:3"},
    ]
    results = [_run_stage_on(rs, str(tmp_path / f"o{i}")) for i, rs in enumerate((records, records[::-1]))]
    assert results[0] == results[1]
    kept, rejected = results[0]
    assert [d["id"] for d in kept] == ["text:x"]
    assert sorted(r["reason"] for r in rejected) == ["duplicate_id", "exact_duplicate"]


def test_write_shards_sorted_by_id_deterministic_and_complete(tmp_path):
    docs = [
        {"id": f"d{i:03d}", "source": "text", "title": "", "url": "", "sentences": ["句子。"] * (i % 3 + 1)}
        for i in range(50)
    ]
    outs = []
    for run in range(2):
        out_dir = str(tmp_path / f"run{run}")
        with BeamTestPipeline(argv=ARGS) as p:
            _ = (
                p
                | beam.Create(docs[:: 1 if run == 0 else -1])
                | finalize.WriteShards(out_dir, "docs", 100, lambda d: sum(map(len, d["sentences"])))
            )
        outs.append(out_dir)
    files = sorted(f for f in os.listdir(outs[0]) if f.startswith("docs-"))
    assert len(files) == 3 and files[0] == "docs-00000-of-00003.jsonl.gz"  # 297 characters, 100 per shard
    ids = []
    for name in files:
        a = open(os.path.join(outs[0], name), "rb").read()
        assert (
            a == open(os.path.join(outs[1], name), "rb").read()
        )  # byte-identical across runs and input order
        shard_ids = [json.loads(line)["id"] for line in gzip.decompress(a).splitlines()]
        assert shard_ids == sorted(shard_ids)
        ids += shard_ids
    assert sorted(ids) == [d["id"] for d in docs]

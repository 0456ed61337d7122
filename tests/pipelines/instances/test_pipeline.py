"""The instance transforms through a real Beam runner: groups, dead letters, valid records."""

from __future__ import annotations

import glob
import gzip
import json
import os

import apache_beam as beam
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from pipelines.instance_builder import split_of
from pipelines.instances import CreateInstances, ReadGroups
from tests.pipelines.instances.fixtures import CONFIG, RUNNER, check_instance, write_corpus
from tests.pipelines.instances.records import parse_dir


def test_read_groups_splits_groups_and_dead_letters(tmp_path, sample_docs, vocab_dir):
    docs = sample_docs[:30] + [
        {"id": "bad", "sentences": "not a list"},
        {"id": "empty", "sentences": ["  ", ""]},
    ]
    path = write_corpus(tmp_path / "c", docs, shards=1)
    path = glob.glob(os.path.join(path, "docs-*.jsonl.gz"))[0]
    with TestPipeline(argv=RUNNER) as p:
        out = (
            p
            | beam.Create([(0, "jsonl", path)])
            | beam.ParDo(
                ReadGroups(CONFIG, str(tmp_path), os.path.join(vocab_dir, "spm.model"))
            ).with_outputs("read", main="groups")
        )
        docs_per_split = out.groups | beam.FlatMap(lambda g: [(g.split, d.id) for d in g.docs])
        expected = [(split_of(d["id"], CONFIG.eval_fraction), d["id"]) for d in sample_docs[:30]]
        assert_that(docs_per_split, equal_to(expected), label="kept")
        read_stats = [{"documents_read": 32, "skipped": {"malformed_document": 1, "empty": 1}}]
        assert_that(out.read, equal_to(read_stats), label="read")
    dead = [json.loads(x) for x in gzip.open(tmp_path / "skipped-00000.jsonl.gz", "rt")]
    assert [(r["id"], r["reason"]) for r in dead] == [("bad", "malformed_document"), ("empty", "empty")]
    assert dead[0]["raw"] and dead[0]["where"].endswith(":31")


def test_create_instances_writes_valid_records(tmp_path, corpus, vocab_dir):
    from pipelines.instances import resolve_inputs

    out = str(tmp_path / "out")
    os.makedirs(out)

    def one_split_per_file(stats):
        assert stats and all(len(s) == 1 and next(iter(s)) in ("train", "eval") for s in stats)

    with TestPipeline(argv=RUNNER) as p:
        stats = (
            p
            | beam.Create(resolve_inputs(None, corpus))
            | CreateInstances(f"{vocab_dir}/spm.model", out, CONFIG)
        )
        assert_that(stats, one_split_per_file)
    records = parse_dir(out)
    assert len(records) > 50
    stats = json.load(open(os.path.join(out, "stats.json")))
    assert stats["train"]["instances"] == len(records)
    for r in records:
        check_instance(r)


def test_the_dead_letter_is_streamed_with_the_bytes_of_one_gzip_compress(tmp_path, sample_docs):
    """Records go to the file as they come (a file full of broken records is never held in memory),
    and the file is what compressing all the lines at once gave, byte for byte."""
    from pipelines.instances.pipeline import DeadLetter

    records = [
        {"id": f"d{k}", "reason": "malformed_document", "where": f"in.jsonl:{k}", "raw": json.dumps(d, ensure_ascii=False)}
        for k, d in enumerate(sample_docs * 3)
    ]  # fmt: skip
    path = str(tmp_path / "skipped-00000.jsonl.gz")
    dead = DeadLetter(path)
    for r in records:
        dead.write(r)
    dead.close()
    lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    assert open(path, "rb").read() == gzip.compress(lines.encode(), mtime=0)
    DeadLetter(str(tmp_path / "none.jsonl.gz")).close()
    assert not os.path.exists(tmp_path / "none.jsonl.gz"), "no file when nothing was skipped"

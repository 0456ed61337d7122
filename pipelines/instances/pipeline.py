"""The Beam transforms of the instance stage: input files -> TFRecord files of ALBERT instances.

    inputs: [(index, kind, path)]                      one element per input file, sorted by path
      | GroupByKey(file index)                         spread input files over workers
      | ReadGroups        -> Group(file, split, n, [PreparedDoc])   ~group_chars characters each,
                             < 2 * group_chars (longer documents are cut: pipelines.instances.grouping)
                          -> "read": {documents_read, skipped: {reason: n}} per input file
                             (notes per split count repairs, and text documents cut at a size cap)
                             (+ skipped-<file>.jsonl.gz: the dead letter, every record with its reason)
      | WriteGroupFiles   -> stats dict per written file            one TFRecord file per (group, dupe)
      | CombineGlobally(merge_stats) | WriteStats      -> stats.json  (never empty: one "read" per file)

Groups are consecutive documents of ONE input file and never need a shuffle of documents, so memory
per worker is bounded by the group size whatever the corpus size, and the files written depend only on
the input, the options and the seed: not on the runner, the number of workers, or processing order.
A file that cannot be read to its end is reported in the stats, never raised (see `ReadGroups`); the
driver (pipelines.instances.stage) decides what that means for the run.
"""

from __future__ import annotations

import json
import zlib
from collections import Counter

import apache_beam as beam
from apache_beam.metrics import Metrics

from core import storage
from core.tokenizer import Tokenizer
from core.tokenizer_normalizer import TextNormalizer
from pipelines import documents, peoples_daily
from pipelines.documents import UnreadableFile
from pipelines.instance_builder import (
    InstanceConfig,
    build_group,
    encode_group,
    merge_stats,
    prepare_document,
)
from pipelines.instances.grouping import Group, Grouper

NAMESPACE = "albert.instances"


def iter_documents(kind: str, path: str):
    if kind == "text":
        return documents.read_text_documents(path)
    if kind == "jsonl":
        return documents.read_jsonl_documents(path)
    if kind == "peoples-daily":  # the bundled sample, given no input: without the NER dev/test articles
        return peoples_daily.pretraining_articles(path)
    raise ValueError(f"unknown input kind {kind!r}")


def _documents(kind: str, path: str, unreadable: list[str]):
    """iter_documents; a file that cannot be read to its end ends the stream, its error noted in
    `unreadable`."""
    try:
        yield from iter_documents(kind, path)
    except UnreadableFile as err:
        unreadable.append(str(err))


class ReadGroups(beam.DoFn):
    """(index, kind, path) -> Group elements, plus one "read" stats dict per input file.

    Unusable documents go to `skipped-<index>.jsonl.gz` in `out_dir` (dead letter: id, reason, where,
    and the raw line when there is one), written by the worker that reads that input file. A file
    that cannot be read to its end is reported in the stats ("unreadable"), never raised: an exception
    would reach the driver as a runner-specific traceback, the stats reach it as data."""

    def __init__(self, config: InstanceConfig, out_dir: str, vocab_model: str):
        self.config = config
        self.out_dir = out_dir
        self.vocab_model = vocab_model
        self.read = Metrics.counter(NAMESPACE, "documents_read")
        self.kept = Metrics.counter(NAMESPACE, "documents_kept")
        self.skipped = Metrics.counter(NAMESPACE, "documents_skipped")

    def setup(self):
        # The vocabulary decides how text is normalized (rules compiled into spm.model, or Python).
        self.normalizer = TextNormalizer(storage.read_bytes(self.vocab_model))

    def process(self, item):
        file_index, kind, path = item
        cfg = self.config
        grouper = Grouper(file_index, cfg)
        dead = DeadLetter(storage.join(self.out_dir, f"skipped-{file_index:05d}.jsonl.gz"))
        reasons: Counter = Counter()
        n_read = 0
        unreadable: list[str] = []
        try:
            for n, doc in enumerate(_documents(kind, path, unreadable)):
                n_read += 1
                self.read.inc()
                doc_notes: Counter = Counter()
                if doc.get("_cut"):  # ended at the reader's size cap, not at a blank line (documents.py)
                    doc_notes["documents_cut_at_size_cap"] += 1
                prepared = prepare_document(doc, cfg.whole_word, doc_notes, self.normalizer)
                if isinstance(prepared, str):
                    self.skipped.inc()
                    Metrics.counter(NAMESPACE, f"skipped_{prepared}").inc()
                    reasons[prepared] += 1
                    doc_id = doc.get("id")
                    dead.write(
                        {"id": doc_id if isinstance(doc_id, str) else None, "reason": prepared,
                         "where": doc.get("_where", f"{path}#{n}"), "raw": doc.get("_raw")}
                    )  # fmt: skip
                    continue
                self.kept.inc()
                yield from grouper.add(prepared, doc_notes)
            yield from grouper.finish()
        finally:
            dead.close()
        read = {"documents_read": n_read, "skipped": dict(reasons)}
        if unreadable:
            read["unreadable"] = [f"{unreadable[0]}, after {n_read} documents"]
        yield beam.pvalue.TaggedOutput("read", read)


class DeadLetter:
    """`skipped-<file>.jsonl.gz`, written record by record as documents are skipped, never held: an
    input file with many broken records must not fill a worker's memory before the stage can fail on
    them. Created on the first record (no file when nothing was skipped). One gzip member, deflated
    as a stream: the bytes of `gzip.compress(all lines, mtime=0)` (zlib's own gzip framing)."""

    def __init__(self, path: str):
        self.path = path
        self._file = None
        self._deflate = None

    def write(self, record: dict) -> None:
        if self._file is None:
            self._file = storage.open_write(self.path)
            self._deflate = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: gzip header and trailer
        self._file.write(self._deflate.compress((json.dumps(record, ensure_ascii=False) + "\n").encode()))

    def close(self) -> None:
        if self._file is not None:
            self._file.write(self._deflate.flush())
            self._file.close()
            self._file = self._deflate = None


class WriteGroupFiles(beam.DoFn):
    """Group -> one TFRecord file per dupe index; yields a stats dict per file."""

    def __init__(self, vocab_model: str, out_dir: str, config: InstanceConfig):
        self.vocab_model = vocab_model
        self.out_dir = out_dir
        self.config = config
        self.instances = Metrics.counter(NAMESPACE, "instances_written")
        self.tokens = Metrics.counter(NAMESPACE, "real_tokens_written")

    def setup(self):
        self.tokenizer = Tokenizer(storage.read_bytes(self.vocab_model))

    def process(self, group: Group):
        stream = encode_group(group.docs, self.tokenizer, self.config.whole_word)  # once for all copies
        for dupe in range(self.config.dupe_factor):
            blob, stats = build_group(group.docs, self.tokenizer, self.config, dupe, stream)
            name = f"{group.split}-{group.file_index:05d}-{group.index:05d}-{dupe:03d}.tfrecord"
            if blob:
                storage.write_bytes(storage.join(self.out_dir, name), blob)
                stats["files"] = [{"name": name, "records": stats["instances"], "bytes": len(blob)}]
            self.instances.inc(stats["instances"])
            self.tokens.inc(stats["real_tokens"])
            if dupe == 0:  # document-level counts once per group, not once per copy
                stats["documents"] = group.documents  # a document cut at the cap counts once
                stats["sentences"] = sum(len(d.sentences) for d in group.docs)
                stats["characters"] = sum(d.chars for d in group.docs)
                stats["notes"] = dict(group.notes)
            yield {group.split: stats}


class _MergeStats(beam.CombineFn):
    def create_accumulator(self):
        return {}

    def add_input(self, acc, item):
        return merge_stats(acc, item)

    def merge_accumulators(self, accs):
        out = {}
        for a in accs:
            out = merge_stats(out, a)
        return out

    def extract_output(self, acc):
        # Lists of files concatenate in the order the workers finished: put them in a canonical order,
        # so that stats.json, like the TFRecords, depends on the input only (not on the runner).
        for split in ("train", "eval"):
            if "files" in acc.get(split, {}):
                acc[split]["files"] = sorted(acc[split]["files"], key=lambda f: f["name"])
        if "unreadable" in acc:
            acc["unreadable"] = sorted(acc["unreadable"])
        return acc


def _write_json(obj, path: str) -> None:
    storage.write_text(path, json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=True))


class CreateInstances(beam.PTransform):
    """PCollection[(index, kind, path)] -> PCollection[stats dict] (one per TFRecord file written);
    writes the TFRecords, `skipped-*.jsonl.gz` (dead letter) and `stats.json` under `out_dir`."""

    def __init__(self, vocab_model: str, out_dir: str, config: InstanceConfig):
        super().__init__()
        self.vocab_model, self.out_dir, self.config = vocab_model, out_dir, config

    def expand(self, inputs):
        read = (
            inputs
            # One key per input file, so files spread over workers: a GroupByKey does what a Reshuffle
            # would here, in fewer steps for the runner to plan and run (part of the fixed cost).
            | "KeyByFile" >> beam.Map(lambda item: (item[0], item))
            | "SpreadInputs" >> beam.GroupByKey()
            | "Unkey" >> beam.FlatMap(lambda kv: kv[1])
            | "ReadGroups"
            >> beam.ParDo(ReadGroups(self.config, self.out_dir, self.vocab_model)).with_outputs(
                "read", main="groups"
            )
        )
        file_stats = read.groups | "WriteGroupFiles" >> beam.ParDo(
            WriteGroupFiles(self.vocab_model, self.out_dir, self.config)
        )
        _ = (
            (file_stats, read.read)
            | "AllStats" >> beam.Flatten()
            | "MergeStats" >> beam.CombineGlobally(_MergeStats()).without_defaults()
            | "WriteStats" >> beam.Map(_write_json, storage.join(self.out_dir, "stats.json"))
        )
        return file_stats

"""The corpus stage as one Apache Beam pipeline: read -> clean -> dedup -> segment -> sharded output.

    work items (one per input file)
      | ReadSources        -> raw records (+ reader errors)              split into byte ranges, spread
      | CleanDocuments     -> (id, cleaned doc) | rejected               wikitext, normalize, filters
      |   fingerprints     -> (text hash, id), (id, signature), (line hash, id)
      | ExactDuplicates    -> (id, survivor)
      | NearDuplicates     -> (id, survivor)                             MinHash LSH + components
      | RepeatedLines      -> (id, (line hash, reason))                  over the survivors only
      | Finalize           -> output document | rejected                 join by id, segment
      | WriteShards        -> docs-NNNNN.jsonl.gz, rejected-NNNNN.jsonl.gz (+ one summary per shard)

Shards are chosen by a hash of the id and sorted by id before writing (gzip without timestamps), so a
rerun over the same inputs and options writes byte-identical files. Counters (namespace `corpus`):
read/<source>, kept/<source>, dropped/<source>/<reason>, dead_letter/<source>/<reason>,
lines_removed/<rule>.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import math

import apache_beam as beam
import xxhash
from apache_beam.metrics import Metrics

from pipelines.core import storage
from pipelines.corpus import clean
from pipelines.corpus.dedup import NS, ExactDuplicates, NearDuplicates, RepeatedLines
from pipelines.corpus.normalize import ChineseConverter
from pipelines.corpus.options import CorpusOptions
from pipelines.corpus.sources import read_work, split_work

TMP_DIR = "_tmp"
SUMMARY = "summary.json"


def _count(name: str, n: int = 1) -> None:
    Metrics.counter(NS, name).inc(n)


def count_rejected(rec: dict) -> None:
    kind = "dead_letter" if rec["dead_letter"] else "dropped"
    _count(f"{kind}/{rec['source']}/{rec['reason']}")


# --- read -----------------------------------------------------------------------------------------------


class _ReadWork(beam.DoFn):
    def __init__(self, opts: CorpusOptions):
        self.opts = opts

    def process(self, item):
        if item.get("index_error"):
            _count(f"index_unreadable/{item['kind']}")
        for record in read_work(item, self.opts):
            _count(f"read/{record['source']}")
            yield record


class ReadSources(beam.PTransform):
    """Work items -> raw records and reader errors (see sources.py and readers/). The first Reshuffle
    spreads the byte ranges of one big file over all workers, the second the records."""

    def __init__(self, items: list[dict], opts: CorpusOptions):
        super().__init__()
        self.items, self.opts = items, opts

    def expand(self, pbegin):
        return (
            pbegin
            | "WorkItems" >> beam.Create(self.items)
            | "SplitFiles" >> beam.FlatMap(split_work, self.opts)
            | "Spread" >> beam.Reshuffle()
            | "Read" >> beam.ParDo(_ReadWork(self.opts))
            # Records are spread again: cleaning (wikitext parsing above all) costs far more than
            # reading, and one file (or the sample) must not be cleaned by the worker that read it.
            | "SpreadRecords" >> beam.Reshuffle()
        )


# --- clean -------------------------------------------------------------------------------------------------

DOCS, REJECTED, HASHES, SIGNATURES, LINES = "docs", "rejected", "hashes", "signatures", "lines"


class _Clean(beam.DoFn):
    """Raw record -> main output (id, cleaned doc) plus tagged fingerprints; rejects and dead letters
    to REJECTED. An exception on one record dead-letters that record; the pipeline goes on."""

    def __init__(self, opts: CorpusOptions):
        self.opts = opts
        self.convert = None

    def setup(self):
        self.convert = ChineseConverter(self.opts.opencc) if self.opts.opencc != "off" else None

    def process(self, record):
        if "error" in record:
            rec = clean.dead_letter(record)
        else:
            try:
                verdict, rec, removed = clean.clean_record(record, self.opts, self.convert)
                if verdict == "doc":
                    doc = rec
                    fingerprints = (
                        clean.text_hash(doc["lines"]),
                        clean.doc_signature(doc["lines"], self.opts),
                        clean.line_hashes(doc["lines"], self.opts),
                    )
            except Exception as err:  # noqa: BLE001 -- any failure on one record is that record's dead letter
                verdict, removed = "drop", {}
                rec = clean.rejected(
                    record, "processing_error", "clean", f"{type(err).__name__}: {err}", True
                )
            for rule, n in removed.items():
                _count(f"lines_removed/{rule}", n)
            if verdict == "doc":
                text_hash, sig, line_keys = fingerprints
                yield doc["id"], doc
                yield beam.pvalue.TaggedOutput(HASHES, (text_hash, doc["id"]))
                yield beam.pvalue.TaggedOutput(SIGNATURES, (doc["id"], sig))
                yield beam.pvalue.TaggedOutput(LINES, (doc["id"], line_keys))
                rec = None
        if rec is not None:
            count_rejected(rec)
            yield beam.pvalue.TaggedOutput(REJECTED, rec)


class CleanDocuments(beam.PTransform):
    """Raw records -> DoOutputsTuple: main (id, doc), REJECTED, HASHES, SIGNATURES, LINES."""

    def __init__(self, opts: CorpusOptions):
        super().__init__()
        self.opts = opts

    def expand(self, records):
        return records | "Clean" >> beam.ParDo(_Clean(self.opts)).with_outputs(
            REJECTED, HASHES, SIGNATURES, LINES, main=DOCS
        )


# --- dedup and finalize -----------------------------------------------------------------------------------


def _not_removed(kv, tag: str):
    """After CoGroupByKey({tag: values, 'exact': ..., 'near': ...}): the values of ids not removed."""
    doc_id, grouped = kv
    removed = any(True for _ in grouped.get("exact", ())) or any(True for _ in grouped.get("near", ()))
    first = next(iter(grouped[tag]), None)  # one value per id: duplicate ids are settled in Finalize
    if not removed and first is not None:
        yield doc_id, first


def _occurrences(kv):
    doc_id, keys = kv
    for key in keys:
        yield key, doc_id


class _Finalize(beam.DoFn):
    def __init__(self, opts: CorpusOptions):
        self.opts = opts

    def process(self, kv):
        _, grouped = kv
        docs = list(grouped["doc"])
        if docs:  # (verdicts always come with their doc; an id without one has nothing to write)
            yield from self._finalize(docs, grouped)

    def _finalize(self, docs, grouped):
        exact = min(grouped["exact"], default=None)
        near = min(grouped["near"], default=None)
        removals = set(grouped["lines"])
        kept, dropped, removed = clean.finalize_document(docs, exact, near, removals, self.opts)
        for rule, n in removed.items():
            _count(f"lines_removed/{rule}", n)
        for rec in dropped:
            count_rejected(rec)
            yield beam.pvalue.TaggedOutput(REJECTED, rec)
        yield from kept


class Deduplicate(beam.PTransform):
    """{DOCS, HASHES, SIGNATURES, LINES} of CleanDocuments -> (kept output documents, rejected)."""

    def __init__(self, opts: CorpusOptions):
        super().__init__()
        self.opts = opts

    def expand(self, cleaned):
        docs, hashes, sigs, lines = cleaned[DOCS], cleaned[HASHES], cleaned[SIGNATURES], cleaned[LINES]
        exact = hashes | "Exact" >> ExactDuplicates()
        surviving_sigs = (
            {"sig": sigs, "exact": exact}
            | "JoinSigExact" >> beam.CoGroupByKey()
            | "SigsOfSurvivors" >> beam.FlatMap(_not_removed, "sig")
        )
        near = surviving_sigs | "Near" >> NearDuplicates(self.opts)
        line_removals = (
            {"lines": lines, "exact": exact, "near": near}
            | "JoinLinesVerdicts" >> beam.CoGroupByKey()
            | "LinesOfSurvivors" >> beam.FlatMap(_not_removed, "lines")
            | "Occurrences" >> beam.FlatMap(_occurrences)
            | "Repeated" >> RepeatedLines(self.opts.boilerplate_min_docs)
        )
        final = (
            {"doc": docs, "exact": exact, "near": near, "lines": line_removals}
            | "JoinById" >> beam.CoGroupByKey()
            | "Finalize" >> beam.ParDo(_Finalize(self.opts)).with_outputs(REJECTED, main=DOCS)
        )
        return final[DOCS], final[REJECTED]


# --- output -------------------------------------------------------------------------------------------------


def shard_of(doc_id, n: int) -> int:
    return xxhash.xxh64_intdigest(str(doc_id).encode("utf-8")) % n


def dumps(record: dict) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def shard_name(prefix: str, index: int, count: int) -> str:
    return f"{prefix}-{index:05d}-of-{count:05d}.jsonl.gz"


class _WriteShard(beam.DoFn):
    """(shard, [record | None]) -> writes one gzip JSON-lines file sorted by id; yields its summary."""

    def __init__(self, out_dir: str, prefix: str):
        self.out_dir, self.prefix = out_dir, prefix

    def process(self, kv, count):
        index, records = kv
        records = sorted((r for r in records if r is not None), key=lambda r: (str(r["id"]), dumps(r)))
        buf = io.BytesIO()
        # mtime=0 and no file name in the header: identical content gives identical bytes.
        with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0) as gz:
            for r in records:
                gz.write(dumps(r).encode("utf-8") + b"\n")
        data = buf.getvalue()
        name = shard_name(self.prefix, index, count)
        path = storage.join(self.out_dir, name)
        storage.write_bytes(path, data)  # appears whole: a renamed temporary file, or one upload
        by_key: dict[str, int] = {}
        for r in records:
            if self.prefix == "docs":
                key = f"kept/{r['source']}"
                _count(key)
            else:
                key = f"{'dead_letter' if r['dead_letter'] else 'dropped'}/{r['source']}/{r['reason']}"
            by_key[key] = by_key.get(key, 0) + 1
        yield {
            "file": name,
            "records": len(records),
            "sha256": hashlib.sha256(data).hexdigest(),
            "bytes": len(data),
            "counts": by_key,
        }


class WriteShards(beam.PTransform):
    """Records -> `<prefix>-NNNNN-of-MMMMM.jsonl.gz`; M from `fixed` or from the total `size_fn` over
    `per_shard` (every shard file is written, empty ones too). Output: one summary dict per shard."""

    def __init__(self, out_dir: str, prefix: str, per_shard: int, size_fn, fixed: int = 0):
        super().__init__()
        self.out_dir, self.prefix, self.per_shard, self.size_fn, self.fixed = (
            out_dir,
            prefix,
            per_shard,
            size_fn,
            fixed,
        )

    def expand(self, records):
        per_shard, fixed = self.per_shard, self.fixed
        count = (
            records
            | "Size" >> beam.Map(self.size_fn)
            | "Total" >> beam.CombineGlobally(sum)
            | "ShardCount" >> beam.Map(lambda total: fixed or max(1, math.ceil(total / per_shard)))
        )
        count_si = beam.pvalue.AsSingleton(count)
        keyed = records | "Key" >> beam.Map(lambda r, n: (shard_of(r["id"], n), r), n=count_si)
        markers = count | "EveryShard" >> beam.FlatMap(lambda n: [(i, None) for i in range(n)])
        return (
            (keyed, markers)
            | "WithMarkers" >> beam.Flatten()
            | "GroupByShard" >> beam.GroupByKey()
            | "Write" >> beam.ParDo(_WriteShard(self.out_dir, self.prefix), count=count_si)
        )


def _doc_chars(doc: dict) -> int:
    return sum(len(s) for s in doc["sentences"])


def _write_summary(summaries: list[dict], out_dir: str) -> str:
    path = storage.join(out_dir, TMP_DIR, SUMMARY)
    storage.write_text(path, json.dumps(sorted(summaries, key=lambda s: s["file"]), ensure_ascii=False))
    return path


def build_pipeline(p: beam.Pipeline, items: list[dict], out_dir: str, opts: CorpusOptions) -> None:
    """Add the whole corpus stage to pipeline `p`."""
    records = p | "ReadSources" >> ReadSources(items, opts)
    cleaned = records | "CleanDocuments" >> CleanDocuments(opts)
    kept, dedup_rejected = {tag: cleaned[tag] for tag in (DOCS, HASHES, SIGNATURES, LINES)} | (
        "Deduplicate" >> Deduplicate(opts)
    )
    rejected = (cleaned[REJECTED], dedup_rejected) | "AllRejected" >> beam.Flatten()
    doc_summaries = kept | "WriteDocs" >> WriteShards(
        out_dir, "docs", opts.shard_chars, _doc_chars, opts.shards
    )
    rej_summaries = rejected | "WriteRejected" >> WriteShards(
        out_dir, "rejected", opts.rejected_shard_records, lambda r: 1
    )
    (
        (doc_summaries, rej_summaries)
        | "AllSummaries" >> beam.Flatten()
        | "CollectSummaries" >> beam.combiners.ToList()
        | "WriteSummary" >> beam.Map(_write_summary, out_dir)
    )

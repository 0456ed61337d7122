"""The corpus stage as one Apache Beam pipeline: read -> clean -> dedup -> segment -> sharded output.

    work items (one per input file)
      | ReadSources        -> raw records (+ reader errors)              split into byte ranges, spread
      | CleanDocuments     -> (id, DocRef) | rejected                    wikitext, normalize, filters;
      |                                                                  the cleaned text to spill files
      |   fingerprints     -> (text hash, id), (id, signature), (id, [line hash])
      | Deduplicate        -> exact, near (id, survivor); lines (id, (line hash, reason))   dedup.py
      | Verdicts           -> (spill file, (position, verdict))          one per document   finalize.py
      | FinalPass          -> sorted shard pieces | rejected             segment (spill.py)
      | MergeShards        -> docs-NNNNN-of-MMMMM.jsonl.gz; WriteShards -> rejected-NNNNN-of-MMMMM.jsonl.gz

Only ids, hashes, signatures and verdicts travel through shuffles, never a document's text (spill.py
says why and how).

The counts stats.json is built from are pipeline data (tally.py): every counting step has a TALLY
output, one {name: count} per bundle; `finish_stage` sums them (TotalCounts) and writes the sum with the
shards' summaries to out_dir/_tmp/summary.json, which the launcher reads (stage.py). accounting.py names
the counts, builds and parses their names; per input file they are counted in _ReadWork.
"""

from __future__ import annotations

import json

import apache_beam as beam

from core import storage
from pipelines.corpus import clean
from pipelines.corpus.accounting import (
    chars_counter,
    diagnostic_counter,
    file_counter,
    increment,
    length_counter,
    near_cluster_counter,
    read_counter,
)
from pipelines.corpus.dedup import Deduplicate
from pipelines.corpus.eval_index import IndexFile
from pipelines.corpus.finalize import (
    PIECES,
    FinalPass,
    MergeShards,
    Verdicts,
    WriteShards,
    doc_ref,
    ref_chars,
    shard_count_for,
)
from pipelines.corpus.options import CorpusOptions
from pipelines.corpus.readers.ids import file_key
from pipelines.corpus.sources import read_work, split_work
from pipelines.corpus.spill import SPILL_DIR, SpillWriter
from pipelines.corpus.tally import TALLY, Tally, TotalCounts
from pipelines.corpus.text_cleaning import ChineseConverter

TMP_DIR = "_tmp"
SUMMARY = "summary.json"


# --- read -----------------------------------------------------------------------------------------------


class _ReadWork(beam.DoFn):
    """A work item -> its raw records (main output), and the tally of its bundle (TALLY). Counts them:
    `read/<source>` per record (a dead letter of lost records counts as that many:
    readers/error_records.py), and per file (`file/<what>/KIND:NAME`, readers/ids.py) what damaged input
    lost and, for a dump with its multistream index, the pages it lists and the pages read (the index
    invariant). Only those: a corpus of a thousand files should not make a thousand counts per file."""

    def __init__(self, opts: CorpusOptions):
        self.opts = opts

    def start_bundle(self):
        self.tally = Tally()

    def finish_bundle(self):
        yield from self.tally.emit()

    def process(self, item):
        tally = self.tally
        if item.get("index_error"):
            tally.add(diagnostic_counter("index_unreadable", item["kind"]))
        key, read = file_key(item), 0
        for record in read_work(item, self.opts):
            lost = record.get("lost")
            records = lost["records"] if lost else 1
            tally.add(read_counter(record["source"]), records)
            read += records
            if lost:
                tally.add(file_counter("lost_records", key), records)
                tally.add(file_counter("lost_bytes", key), lost["bytes"])
                if lost["estimated"]:
                    tally.add(file_counter("lost_estimated", key), records)
                if lost["rest_unknown"]:
                    tally.add(file_counter("lost_rest_unknown", key))
            yield record
        if item.get("streams"):
            tally.add(file_counter("read", key), read)
            tally.add(file_counter("listed", key), sum(pages for _, pages in item["streams"]))


RECORDS = "records"


class ReadSources(beam.PTransform):
    """Work items -> DoOutputsTuple: RECORDS, the raw records and reader errors (see sources.py and
    readers/), and TALLY. The Reshuffle spreads the byte ranges of the inputs over all workers;
    records are cleaned where they are read (no shuffle of raw text: what travels through a shuffle
    is what costs memory on a local runner). A file that cannot be split into ranges (compressed JSON
    lines, a dump without its multistream index, the bundled sample) is therefore read and cleaned by
    one worker."""

    def __init__(self, items: list[dict], opts: CorpusOptions):
        super().__init__()
        self.items, self.opts = items, opts

    def expand(self, pbegin):
        return (
            pbegin
            | "WorkItems" >> beam.Create(self.items)
            | "SplitFiles" >> beam.FlatMap(split_work, self.opts)
            | "Spread" >> beam.Reshuffle()
            | "Read" >> beam.ParDo(_ReadWork(self.opts)).with_outputs(TALLY, main=RECORDS)
        )


# --- clean -------------------------------------------------------------------------------------------------

DOCS, REJECTED, HASHES, HANDLES, LINES = "docs", "rejected", "hashes", "handles", "lines"


class _Clean(beam.DoFn):
    """Raw record -> main output (id, DocRef) plus tagged fingerprints; rejects and dead letters to
    REJECTED; the bundle's counts to TALLY. The cleaned document itself goes to a spill file
    (spill.py), not downstream. An exception on one record dead-letters that record; the pipeline
    goes on."""

    def __init__(self, opts: CorpusOptions, spill_dir: str, index_file: IndexFile | None):
        self.opts, self.spill_dir, self.index_file = opts, spill_dir, index_file
        self.convert = None
        self.spill = None
        self.index = None

    def setup(self):
        self.index = self.index_file.load() if self.index_file else None
        self.convert = (
            ChineseConverter(self.opts.cleaning.opencc) if self.opts.cleaning.opencc != "off" else None
        )

    def start_bundle(self):
        self.spill = SpillWriter(self.spill_dir)
        self.tally = Tally()

    def finish_bundle(self):
        self.spill.close()  # before the bundle's outputs (the handles) are committed
        yield from self.tally.emit()

    def process(self, record):
        if "error" in record:
            rec = clean.rejected_unreadable(record)
        else:
            text = record.get("text")  # a record without its text is dead-lettered below
            raw_chars = len(text) if isinstance(text, str) else 0
            if raw_chars:
                self.tally.add(chars_counter("read", record["source"]), raw_chars)
            self.tally.add(length_counter("before", raw_chars))
            try:
                verdict, rec, counts = clean.clean_record(record, self.opts, self.convert, self.index)
                if verdict == "doc":
                    doc = rec
                    fingerprints = (
                        clean.text_hash(doc["lines"]),
                        clean.doc_signature(doc["lines"], self.opts),
                        clean.line_hashes(doc["lines"], self.opts),
                    )
            except Exception as err:  # noqa: BLE001 -- any failure on one record is that record's dead letter
                verdict, counts = "drop", {}
                rec = clean.rejected(
                    record, "processing_error", "clean", f"{type(err).__name__}: {err}", True
                )
            for name, amount in counts.items():
                if amount:
                    self.tally.add(name, amount)
            if verdict == "doc":
                text_hash, sig, line_keys = fingerprints
                stem, position = self.spill.add(doc, sig)
                chars = sum(len(line) for line in doc["lines"])
                yield doc["id"], doc_ref(text_hash, doc["title"], doc["where"], stem, position, chars)
                yield beam.pvalue.TaggedOutput(HASHES, (text_hash, doc["id"]))
                yield beam.pvalue.TaggedOutput(HANDLES, (doc["id"], (text_hash, stem, position)))
                yield beam.pvalue.TaggedOutput(LINES, (doc["id"], line_keys))
                rec = None
        if rec is not None:
            self.tally.add_rejected(rec)
            yield beam.pvalue.TaggedOutput(REJECTED, clean.redact_rejected(rec, self.opts))


class CleanDocuments(beam.PTransform):
    """Raw records -> DoOutputsTuple: main (id, DocRef), REJECTED, HASHES, HANDLES, LINES, TALLY; the
    cleaned documents are in spill files under `spill_dir`. `index_file`: the evaluation sets kept out
    (decontam.save_index; each worker process reads it once)."""

    def __init__(self, opts: CorpusOptions, spill_dir: str, index_file: IndexFile | None = None):
        super().__init__()
        self.opts, self.spill_dir, self.index_file = opts, spill_dir, index_file

    def expand(self, records):
        clean_fn = _Clean(self.opts, self.spill_dir, self.index_file)
        return records | "Clean" >> beam.ParDo(clean_fn).with_outputs(
            REJECTED, HASHES, HANDLES, LINES, TALLY, main=DOCS
        )


# --- the whole stage ------------------------------------------------------------------------------------------


def build_pipeline(
    pipeline: beam.Pipeline,
    items: list[dict],
    out_dir: str,
    opts: CorpusOptions,
    index_file: IndexFile | None = None,
) -> None:
    """Add the whole corpus stage to `pipeline` (`index_file`: the stored index of --decontaminate)."""
    read = pipeline | "ReadSources" >> ReadSources(items, opts)
    spill_dir = storage.join(out_dir, TMP_DIR, SPILL_DIR)
    cleaned = read[RECORDS] | "CleanDocuments" >> CleanDocuments(opts, spill_dir, index_file)
    finish_stage(cleaned, out_dir, opts, (read[TALLY],))


def finish_stage(cleaned, out_dir: str, opts: CorpusOptions, tallies: tuple = ()) -> None:
    """CleanDocuments' outputs (its spill files under out_dir/_tmp/spill) -> the stage's shards and
    out_dir/_tmp/summary.json: {"shards": [summary per shard file], "counts": {name: count}}, the
    counts summed over `tallies` (those of the steps before, e.g. ReadSources) and every tally here.

        fingerprints | Deduplicate     -> exact, near (id, survivor); lines (id, (line hash, reason))
        DocRefs + those | Verdicts     -> (spill file, (position, verdict))       one per document
        | FinalPass                    -> sorted shard pieces (files) | rejected
        pieces | MergeShards           -> docs-NNNNN-of-MMMMM.jsonl.gz (+ one summary per shard)
    """
    tmp = storage.join(out_dir, TMP_DIR)
    refs = cleaned[DOCS]
    fingerprints = {tag: cleaned[tag] for tag in (HASHES, HANDLES, LINES)}
    spill_dir = storage.join(tmp, SPILL_DIR)
    exact, near, line_removals, dedup_tallies = fingerprints | "Deduplicate" >> Deduplicate(opts, spill_dir)
    # near-duplicate cluster sizes for stats.json (the survivor and the ids removed for it)
    cluster_tallies = (
        near
        | "SurvivorOf" >> beam.Map(lambda kv: (kv[1], 1))
        | "RemovedPerSurvivor" >> beam.CombinePerKey(sum)
        | "CountClusters" >> beam.Map(_cluster_tally)
    )
    # Shard count from the characters cleaned (before dedup): known before the final pass, so the
    # final pass writes each kept document straight into its shard's piece.
    shard_count = (
        refs
        | "Chars" >> beam.Map(ref_chars)
        | "TotalChars" >> beam.CombineGlobally(sum)
        | "ShardCount" >> beam.Map(shard_count_for, opts.output.shard_chars, opts.output.shards)
    )
    verdicts = {"ref": refs, "exact": exact, "near": near, "lines": line_removals} | "Verdicts" >> Verdicts()
    final = verdicts | "FinalPass" >> FinalPass(opts, spill_dir, tmp, beam.pvalue.AsSingleton(shard_count))
    doc_summaries = final[PIECES] | "WriteDocs" >> MergeShards(out_dir, shard_count)
    rejected = (cleaned[REJECTED], final[REJECTED]) | "AllRejected" >> beam.Flatten()
    rej_summaries = rejected | "WriteRejected" >> WriteShards(
        out_dir, "rejected", opts.output.rejected_shard_records, lambda r: 1
    )
    tallies = (*tallies, cleaned[TALLY], dedup_tallies, cluster_tallies, final[TALLY])
    counts = tallies | "Counts" >> TotalCounts()
    (
        (doc_summaries, rej_summaries)
        | "AllSummaries" >> beam.Flatten()
        | "CollectSummaries" >> beam.combiners.ToList()
        | "WriteSummary"
        >> beam.Map(_write_summary, out_dir, beam.pvalue.AsSingleton(counts, default_value={}))
    )


def _cluster_tally(kv) -> dict[str, int]:
    """(survivor, ids removed for it) -> the tally of one cluster of that size, survivor included (a
    tally of its own: there are few clusters, and the Beam counter for monitoring)."""
    name = near_cluster_counter(kv[1] + 1)
    increment(name)
    return {name: 1}


def _write_summary(summaries: list[dict], out_dir: str, counts: dict[str, int]) -> str:
    path = storage.join(out_dir, TMP_DIR, SUMMARY)
    summary = {"shards": sorted(summaries, key=lambda s: s["file"]), "counts": dict(sorted(counts.items()))}
    storage.write_text(path, json.dumps(summary, ensure_ascii=False))
    return path

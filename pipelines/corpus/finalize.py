"""The end of the corpus stage: every document's verdict, the final pass over the spill files, and the
sharded output.

PCollection shapes (id: document id str; DocRef: see `doc_ref`; verdict: `keep_verdict`, `reject_verdict`):

    Verdicts:     {"ref": (id, DocRef), "exact": (id, survivor), "near": (id, survivor),
                   "lines": (id, (line hash, reason))}  -> (spill file, (position, verdict))
    FinalPass:    (spill file, [(position, verdict)])   -> PIECES (shard, piece path) | REJECTED record
                                                           | TALLY (tally.py)
    MergeShards:  (shard, piece path)                   -> one summary dict per docs shard written
    WriteShards:  records (rejected)                    -> one summary dict per shard written

A verdict is a keep_verdict for the one document kept under its id, a reject_verdict for the other
documents of the same id.

Shards are chosen by a hash of the id and sorted by id (gzip without timestamps), so a rerun over the
same inputs and options writes byte-identical files.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import math

import apache_beam as beam
import xxhash

from core import storage
from pipelines.corpus import clean
from pipelines.corpus.accounting import (
    chars_counter,
    kept_counter,
    length_counter,
    lines_removed_counter,
    rejected_counter_of,
    weight,
)
from pipelines.corpus.grouping import CoGroupInPartitions, GroupInPartitions
from pipelines.corpus.options import CorpusOptions
from pipelines.corpus.readers.ids import natural_key
from pipelines.corpus.spill import dumps, merge_pieces, piece_path, read_spill, write_piece
from pipelines.corpus.tally import TALLY, Tally

PIECES, REJECTED = "pieces", "rejected"


# A DocRef: what travels for a cleaned document instead of its text. A plain tuple read through these
# index constants, not a NamedTuple: through Beam's coders a NamedTuple costs ~5x the time of a plain
# tuple and ~40% more bytes (docs/architecture.md, "Records").
REF_TEXT_HASH, REF_TITLE, REF_WHERE, REF_SPILL, REF_POSITION, REF_CHARS = range(6)


def doc_ref(text_hash: str, title: str, where: str, spill: str, position: int, chars: int) -> tuple:
    """The DocRef of a cleaned document: its text hash, title, `where` (path and position in its
    input), spill file and position there, and chars (characters of its cleaned lines: sizes the
    output shards)."""
    return (text_hash, title, where, spill, position, chars)


def ref_chars(kv) -> int:
    _, ref = kv
    return ref[REF_CHARS]


def shard_of(doc_id, shard_count: int) -> int:
    return xxhash.xxh64_intdigest(str(doc_id).encode("utf-8")) % shard_count


def shard_name(prefix: str, index: int, count: int) -> str:
    return f"{prefix}-{index:05d}-of-{count:05d}.jsonl.gz"


def shard_count_for(total: int, per_shard: int, fixed: int = 0) -> int:
    return fixed or max(1, math.ceil(total / per_shard))


# --- verdicts -------------------------------------------------------------------------------------------------


# A verdict on one document (Verdicts -> FinalPass): keep it, or reject it with a reason.
KEEP = "keep"


def keep_verdict(exact: str | None, near: str | None, removals: list) -> tuple:
    """Keep the document: its exact and near survivors (None: none) and its lines to remove
    [(line hash, reason)] (clean.finalize_document applies them)."""
    return (KEEP, exact, near, removals)


def reject_verdict(reason: str, detail: str) -> tuple:
    """Reject the document for `reason` (exact_duplicate, duplicate_id), `detail` for its record."""
    return (reason, detail)


def is_keep(verdict: tuple) -> bool:
    return verdict[0] == KEEP


def _verdicts_of_id(kv):
    """All documents cleaned under one id -> (spill file, (position, verdict)) for each. Ids are made
    distinct per file (readers/ids.py), so several documents under one id come from one file (an id
    repeated in it) or have the same text (content ids): the first in file order is kept (`where`:
    path and position), the others are exact duplicates (same text) or duplicate ids (other text)."""
    doc_id, grouped = kv
    # File order (`where`), then the rest of the ref but its size: the same order on every run.
    refs = sorted(grouped["ref"], key=lambda r: (natural_key(r[REF_WHERE]), r[:REF_CHARS]))
    if not refs:  # (verdicts always come with a document; an id without one has nothing to write)
        return
    first = refs[0]
    for other in refs[1:]:
        if other[REF_TEXT_HASH] == first[REF_TEXT_HASH]:
            verdict = reject_verdict(
                "exact_duplicate", f"same text as {first[REF_WHERE]}, duplicate of {doc_id}"
            )
        else:
            verdict = reject_verdict(
                "duplicate_id", f"id {doc_id} again with another text; the first, {first[REF_WHERE]}, is kept"
            )
        yield other[REF_SPILL], (other[REF_POSITION], verdict)
    exact = min(grouped["exact"], default=None)
    near = min(grouped["near"], default=None)
    removals = sorted(set(grouped["lines"]))
    yield first[REF_SPILL], (first[REF_POSITION], keep_verdict(exact, near, removals))


class Verdicts(beam.PTransform):
    def expand(self, inputs):
        return inputs | "JoinById" >> CoGroupInPartitions(then=_verdicts_of_id)


# --- the final pass ----------------------------------------------------------------------------------------


class _FinalPass(beam.DoFn):
    """One spill file and its documents' verdicts -> one sorted piece per shard it has documents for
    (written), plus the records rejected here, and the bundle's counts (TALLY): documents kept, lines
    removed, records rejected, characters and lengths kept. Memory: one spill file's kept documents."""

    def __init__(self, opts: CorpusOptions, spill_dir: str, tmp_dir: str):
        self.opts, self.spill_dir, self.tmp_dir = opts, spill_dir, tmp_dir

    def start_bundle(self):
        self.tally = Tally()

    def finish_bundle(self):
        yield from self.tally.emit()

    def process(self, kv, count):
        name, verdicts = kv
        verdicts = dict(verdicts)
        by_shard: dict[int, list[tuple[str, str]]] = {}
        for position, doc in enumerate(read_spill(self.spill_dir, name)):
            verdict = verdicts.pop(position, None)
            if verdict is None:
                raise RuntimeError(f"spill file {name}: document {position} has no verdict")
            if is_keep(verdict):
                _, exact, near, removals = verdict  # keep_verdict
                kept, dropped, removed = clean.finalize_document(
                    [doc], exact, near, {tuple(r) for r in removals}, self.opts
                )
                for rule, lines in removed.items():
                    self.tally.add(lines_removed_counter(rule), lines)
            else:
                reason, detail = verdict  # reject_verdict
                kept, dropped = [], [clean.rejected(doc, reason, "dedup", detail)]
            for rec in dropped:
                self.tally.add_rejected(rec)
                yield beam.pvalue.TaggedOutput(REJECTED, rec)
            for out in kept:
                chars = sum(len(sentence) for sentence in out["sentences"])
                self.tally.add(kept_counter(out["source"]))
                if chars:
                    self.tally.add(chars_counter("kept", out["source"]), chars)
                self.tally.add(length_counter("after", chars))
                by_shard.setdefault(shard_of(out["id"], count), []).append((str(out["id"]), dumps(out)))
        if verdicts:
            raise RuntimeError(f"spill file {name}: verdicts for {len(verdicts)} documents it does not hold")
        for shard, lines in sorted(by_shard.items()):
            lines.sort()
            path = piece_path(self.tmp_dir, "docs", shard, name)
            write_piece(path, [line for _, line in lines])
            yield shard, path


class FinalPass(beam.PTransform):
    def __init__(self, opts: CorpusOptions, spill_dir: str, tmp_dir: str, count_si):
        super().__init__()
        self.opts, self.spill_dir, self.tmp_dir, self.count_si = opts, spill_dir, tmp_dir, count_si

    def expand(self, verdicts):
        return (
            verdicts
            | "GroupBySpillFile" >> GroupInPartitions()
            | "Finalize"
            >> beam.ParDo(
                _FinalPass(self.opts, self.spill_dir, self.tmp_dir), count=self.count_si
            ).with_outputs(REJECTED, TALLY, main=PIECES)
        )


# --- output --------------------------------------------------------------------------------------------------


GZIP_LEVEL = 4
"""zlib's level 9 (gzip's default) spent 7.5 CPU-s on the 16x scale corpus' 96 MB of documents; level 4
takes 3.1 s for files 3% larger (level 6: 5.6 s, 0.4% larger). These files are read once, by the
instances stage, which decompresses any level at the same speed."""


def _gzip_lines(lines) -> bytes:
    """Lines -> gzip bytes (mtime 0, no file name: identical content gives identical bytes)."""
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=GZIP_LEVEL) as gz:
        for line in lines:
            gz.write(line.encode("utf-8") + b"\n")
    return buf.getvalue()


def _summary_key(prefix: str, r: dict) -> str:
    return kept_counter(r["source"]) if prefix == "docs" else rejected_counter_of(r)


def _write_shard(
    out_dir: str, prefix: str, index: int, count: int, data: bytes, records: int, by_key
) -> dict:
    name = shard_name(prefix, index, count)
    storage.write_bytes(storage.join(out_dir, name), data)  # appears whole: renamed temp file or one upload
    return {
        "file": name,
        "records": records,
        "sha256": hashlib.sha256(data).hexdigest(),
        "bytes": len(data),
        "counts": by_key,
    }


class _MergeShard(beam.DoFn):
    """(shard, [piece path | None]) -> the shard's gzip JSON-lines file, a streaming merge of its
    sorted pieces; yields its summary. Memory: the compressed shard, one line per piece."""

    def __init__(self, out_dir: str):
        self.out_dir = out_dir

    def process(self, kv, count):
        index, paths = kv
        by_key: dict[str, int] = {}

        def tallied_lines():
            for line, record in merge_pieces(p for p in paths if p):
                key = _summary_key("docs", record)
                by_key[key] = by_key.get(key, 0) + 1
                yield line

        data = _gzip_lines(tallied_lines())
        yield _write_shard(self.out_dir, "docs", index, count, data, sum(by_key.values()), by_key)


def _every_shard(shard_count: int):
    return [(index, None) for index in range(shard_count)]


class MergeShards(beam.PTransform):
    """(shard, piece path) -> `docs-NNNNN-of-MMMMM.jsonl.gz`, every shard file written (empty ones too)."""

    def __init__(self, out_dir: str, shard_count):
        super().__init__()
        self.out_dir, self.shard_count = out_dir, shard_count

    def expand(self, pieces):
        markers = self.shard_count | "EveryShard" >> beam.FlatMap(_every_shard)
        return (
            (pieces, markers)
            | "WithMarkers" >> beam.Flatten()
            | "GroupByShard" >> beam.GroupByKey()
            | "Merge"
            >> beam.ParDo(_MergeShard(self.out_dir), count=beam.pvalue.AsSingleton(self.shard_count))
        )


class _WriteShard(beam.DoFn):
    """(shard, [record | None]) -> writes one gzip JSON-lines file sorted by id; yields its summary.
    The whole shard travels through the shuffle: for small records (rejected ones)."""

    def __init__(self, out_dir: str, prefix: str):
        self.out_dir, self.prefix = out_dir, prefix

    def process(self, kv, count):
        index, records = kv
        records = sorted((r for r in records if r is not None), key=lambda r: (str(r["id"]), dumps(r)))
        data = _gzip_lines(dumps(r) for r in records)
        by_key: dict[str, int] = {}
        lost_ids: dict[str, list[str]] = {}  # file -> ids of the records damaged input lost
        for r in records:
            key = _summary_key(self.prefix, r)
            by_key[key] = by_key.get(key, 0) + weight(r)
            if "lost" in r and r["id"] is not None:
                lost_ids.setdefault(r["lost"]["file"], []).append(r["id"])
        summary = _write_shard(self.out_dir, self.prefix, index, count, data, len(records), by_key)
        yield {**summary, "lost_ids": lost_ids} if lost_ids else summary


class WriteShards(beam.PTransform):
    """Records -> `<prefix>-NNNNN-of-MMMMM.jsonl.gz`; M from `fixed` or from the total
    `size_fn` over `per_shard` (every shard file is written, empty ones too). Rejected records are
    small (a 200-character excerpt), so they can travel through one shuffle; documents take the
    spill-file route (FinalPass, MergeShards). Output: one summary per shard."""

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
            | "ShardCount" >> beam.Map(shard_count_for, per_shard, fixed)
        )
        count_si = beam.pvalue.AsSingleton(count)
        keyed = records | "Key" >> beam.Map(
            lambda rec, shard_count: (shard_of(rec["id"], shard_count), rec), shard_count=count_si
        )
        markers = count | "EveryShard" >> beam.FlatMap(_every_shard)
        return (
            (keyed, markers)
            | "WithMarkers" >> beam.Flatten()
            | "GroupByShard" >> beam.GroupByKey()
            | "Write" >> beam.ParDo(_WriteShard(self.out_dir, self.prefix), count=count_si)
        )

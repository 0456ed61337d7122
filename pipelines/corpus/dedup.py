"""Deduplication as Beam composite transforms. Per-element logic lives in minhash.py / clean.py,
near-duplicate search in near.py.

Every transform keeps memory per worker bounded. The groupings of many small entries (text hashes,
LSH band keys, line hashes) and the joins go through grouping.py: batches travel, and a worker holds
one partition (1/256 of the entries) at a time.

PCollection shapes (id: document id str; handle: (text hash, spill stem, position)):

    ExactDuplicates:   (text_hash, id)            -> (id, survivor id)      removed ids only
    RepeatedLines:     (id, [line_hash])          -> (id, (line_hash, reason))   lines to remove, tallies
    Deduplicate:       fingerprints               -> exact, near (id, survivor); lines to remove; tallies

Tallies: the counts of these steps (tally.py), PCollections of {count name: n}.
"""

from __future__ import annotations

from functools import partial

import apache_beam as beam

from pipelines.corpus.accounting import diagnostic_counter
from pipelines.corpus.grouping import CoGroupInPartitions, GroupInPartitions
from pipelines.corpus.near import ConnectedComponents, NearDuplicates
from pipelines.corpus.options import CorpusOptions

__all__ = ["ConnectedComponents", "Deduplicate", "ExactDuplicates", "NearDuplicates", "RepeatedLines"]


def _removals_in_group(kv):
    """(key, ids) -> (id, survivor) for every id but the smallest (an id listed twice is emitted twice:
    consumers only ask whether an id was removed). Two passes over the iterable: the group is never
    held in memory (Dataflow pages large groups)."""
    _, ids = kv
    survivor = min(ids)
    for doc_id in ids:
        if doc_id != survivor:
            yield doc_id, survivor


class ExactDuplicates(beam.PTransform):
    """Documents with the same normalized text: the smallest id survives."""

    def expand(self, hashes):
        return hashes | "GroupByText" >> GroupInPartitions(then=_removals_in_group)


def _line_verdicts(kv, tally, boilerplate_min_docs: int):
    """(line_hash, ids) -> (id, (line_hash, reason)). In >= boilerplate_min_docs distinct documents the
    line is boilerplate and leaves all of them; in fewer (but >= 2) it stays in the smallest id only."""
    key, ids = kv
    distinct: set = set()
    smallest = None
    for doc_id in ids:  # first pass: smallest id, distinct count capped at the threshold
        if smallest is None or doc_id < smallest:
            smallest = doc_id
        if len(distinct) < boilerplate_min_docs:
            distinct.add(doc_id)
    if len(distinct) >= boilerplate_min_docs:
        tally.add(diagnostic_counter("lines", "boilerplate_keys"))
        for doc_id in ids:
            yield doc_id, (key, "boilerplate_line")
    elif len(distinct) >= 2:
        tally.add(diagnostic_counter("lines", "repeated_keys"))
        for doc_id in ids:
            if doc_id != smallest:
                yield doc_id, (key, "repeated_line")


class RepeatedLines(beam.PTransform):
    """C4-style: lines repeated across documents (see _line_verdicts). Input: (id, [line hash]) per
    document; output: (id, (line hash, reason)) per line to remove, and the tallies of the keys found
    repeated (`lines/repeated_keys`, `lines/boilerplate_keys`)."""

    def __init__(self, boilerplate_min_docs: int):
        super().__init__()
        self.boilerplate_min_docs = boilerplate_min_docs

    def expand(self, documents):
        verdicts = partial(_line_verdicts, boilerplate_min_docs=self.boilerplate_min_docs)
        return documents | "GroupByLine" >> GroupInPartitions(
            explode=_occurrences, then=verdicts, counted=True
        )


# --- all of it, on fingerprints ------------------------------------------------------------------------------


def _removed(grouped) -> bool:
    return any(True for _ in grouped.get("exact", ())) or any(True for _ in grouped.get("near", ()))


def _lines_of_survivor(kv):
    """After the join {lines, exact, near}: the line hashes of an id not removed (one list per id:
    duplicate ids are settled in the final pass)."""
    doc_id, grouped = kv
    first = next(iter(grouped["lines"]), None)
    if first is not None and not _removed(grouped):
        yield doc_id, first


def _handle_of_survivor(kv):
    """After the join {handles, exact}: an id not removed, with its smallest handle (several
    documents under one id: the one with the smallest text hash, as the final pass keeps)."""
    doc_id, grouped = kv
    if grouped["handles"] and not _removed(grouped):
        yield doc_id, min(grouped["handles"])


def _occurrences(kv):
    doc_id, keys = kv
    for key in keys:
        yield key, doc_id


class Deduplicate(beam.PTransform):
    """{"hashes": (text hash, id), "handles": (id, handle), "lines": (id, [line hash])} ->
    (exact, near, line removals, tallies): (id, survivor), (id, survivor), (id, (line hash, reason)),
    and the tallies of the near-duplicate search and of the repeated lines.

    Near-duplicates are searched among the documents exact dedup kept, with their signatures read
    from the spill files under sig_dir; repeated lines among the documents both kept. Only ids,
    hashes and handles travel: never a document's text, never a signature per band."""

    def __init__(self, opts: CorpusOptions, sig_dir: str):
        super().__init__()
        self.opts, self.sig_dir = opts, sig_dir

    def expand(self, fingerprints):
        hashes, handles, lines = fingerprints["hashes"], fingerprints["handles"], fingerprints["lines"]
        exact = hashes | "Exact" >> ExactDuplicates()
        survivors = {"handles": handles, "exact": exact} | "JoinHandlesExact" >> CoGroupInPartitions(
            then=_handle_of_survivor
        )
        near, near_tallies = survivors | "Near" >> NearDuplicates(self.opts, self.sig_dir)
        line_removals, line_tallies = (
            {"lines": lines, "exact": exact, "near": near}
            | "JoinLinesVerdicts" >> CoGroupInPartitions(then=_lines_of_survivor)
            | "Repeated" >> RepeatedLines(self.opts.dedup.boilerplate_min_docs)
        )
        tallies = (near_tallies, line_tallies) | "Tallies" >> beam.Flatten()
        return exact, near, line_removals, tallies

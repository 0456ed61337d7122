"""Deduplication as Beam composite transforms. Per-element logic lives in minhash.py / clean.py.

Every transform keeps memory per worker bounded. The three groupings of many small entries (text
hashes, LSH band keys, line hashes) go through grouping.GroupInPartitions: batches travel, and a
worker holds one partition (1/256 of the entries) at a time. Joins iterate their groups rather than
hold them, except the last connected-components step, which only sees labels that had not converged
after `cc_rounds` rounds (none, in practice).

PCollection shapes (id: document id str):

    ExactDuplicates:   (text_hash, id)            -> (id, survivor id)      removed ids only
    NearDuplicates:    (id, signature bytes)      -> (id, survivor id)      removed ids only
    ConnectedComponents: (id_a, id_b) edges       -> (id, smallest id of its component), non-roots
    SurvivorCheck:     removals + signatures      -> the removals similar to their own survivor
    RepeatedLines:     (line_hash, id)            -> (id, (line_hash, reason))   lines to remove
"""

from __future__ import annotations

import apache_beam as beam
import numpy as np
from apache_beam.metrics import Metrics

from pipelines.corpus import minhash
from pipelines.corpus.grouping import CoGroupInPartitions, GroupInPartitions
from pipelines.corpus.options import CorpusOptions

NS = "corpus"


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
        return (
            hashes
            | "GroupByText" >> GroupInPartitions()
            | "AllButSmallest" >> beam.FlatMap(_removals_in_group)
        )


def _band_entries(kv, bands: int, rows: int):
    """(id, signature) -> (band key, id) per band: ids only, a signature does not travel per band."""
    doc_id, sig_bytes = kv
    sig = np.frombuffer(sig_bytes, dtype=np.uint32)
    for key in minhash.band_keys(sig, bands, rows):
        yield key, doc_id


BIG_BUCKET = 2000


def _bucket_candidates(kv, window: int):
    """Candidate pairs (a, b), a < b, of one LSH bucket. Buckets up to BIG_BUCKET members: sorted by id,
    each member with its `window` predecessors. Larger ones (thousands of templated stubs sharing a
    band) are never held: two passes pair every member with the smallest id."""
    _, members = kv
    size, smallest = 0, None
    for doc_id in members:  # first pass: size and smallest member
        size += 1
        if smallest is None or doc_id < smallest:
            smallest = doc_id
    if 2 <= size <= BIG_BUCKET:
        Metrics.counter(NS, "lsh/buckets_with_candidates").inc()
        ids = sorted(set(members))
        for j in range(1, len(ids)):
            for i in range(max(0, j - window), j):
                yield ids[i], ids[j]
    elif size > BIG_BUCKET:
        Metrics.counter(NS, "lsh/big_buckets").inc()
        for doc_id in members:
            if doc_id != smallest:
                yield smallest, doc_id


def _send_first_signature(kv):
    """At a: (b, (a, signature of a)) for every distinct candidate b of a."""
    a, grouped = kv
    sig = next(iter(grouped["sig"]), None)
    if sig is not None:
        for b in sorted(set(grouped["pairs"])):
            yield b, (a, sig)


def _verified_edges(kv, threshold: float):
    """At b: the edges (a, b) whose signatures agree on >= threshold of the permutations."""
    b, grouped = kv
    own = next(iter(grouped["sig"]), None)
    if own is None:
        return
    mine = np.frombuffer(own, dtype=np.uint32)
    for a, sig in grouped["from"]:
        if minhash.estimate_jaccard(np.frombuffer(sig, dtype=np.uint32), mine) >= threshold:
            yield a, b


class NearDuplicates(beam.PTransform):
    """MinHash LSH: documents sharing a band become candidates, candidates whose signatures agree on
    >= near_dup_threshold of the permutations are linked, linked documents form clusters (connected
    components) and the smallest id of each cluster survives.

    What travels: band entries are (band key, id); each distinct candidate pair meets the two
    signatures in two joins (a's signature is sent to b, compared there). A signature crosses a
    shuffle once per join, not once per band."""

    def __init__(self, opts: CorpusOptions):
        super().__init__()
        self.opts = opts

    def expand(self, signatures):
        o = self.opts
        candidates = (
            signatures
            | "Bands" >> beam.FlatMap(_band_entries, o.minhash_bands, o.minhash_rows)
            | "GroupByBand" >> GroupInPartitions()
            | "Candidates" >> beam.FlatMap(_bucket_candidates, o.max_bucket_pairs)
        )  # a pair found in several bands repeats; _send_first_signature keeps one
        edges = (
            {"sig": signatures, "pairs": candidates}
            | "JoinFirstSig" >> CoGroupInPartitions()
            | "SendFirstSig" >> beam.FlatMap(_send_first_signature)
        )
        verified = (
            {"sig": signatures, "from": edges}
            | "JoinSecondSig" >> CoGroupInPartitions()
            | "Verify" >> beam.FlatMap(_verified_edges, o.near_dup_threshold)
        )
        removed = verified | "Clusters" >> ConnectedComponents(o.cc_rounds)
        if o.min_survivor_similarity <= 0:
            return removed
        return {"removed": removed, "sig": signatures} | "CheckSurvivors" >> SurvivorCheck(
            o.min_survivor_similarity
        )


def _survivor_sig_to_members(kv):
    """At survivor s: (member, s's signature) for every member removed in favour of s."""
    survivor, grouped = kv
    sig = next(iter(grouped["sig"]), None)
    if sig is not None:
        for member in grouped["members"]:
            yield member, (survivor, sig)


def _close_to_survivor(kv, min_similarity: float):
    member, grouped = kv
    own = next(iter(grouped["sig"]), None)
    for survivor, survivor_sig in grouped["survivor"]:
        if own is None:
            continue
        agree = minhash.estimate_jaccard(
            np.frombuffer(own, np.uint32), np.frombuffer(survivor_sig, np.uint32)
        )
        if agree >= min_similarity:
            yield member, survivor
        else:
            Metrics.counter(NS, "near_dup/kept_far_from_survivor").inc()


class SurvivorCheck(beam.PTransform):
    """{"removed": (id, survivor), "sig": (id, signature)} -> the removals whose document is itself
    similar to its survivor (estimated Jaccard >= min_similarity). Only removed documents and their
    survivors' signatures move: two joins over a small collection."""

    def __init__(self, min_similarity: float):
        super().__init__()
        self.min_similarity = min_similarity

    def expand(self, inputs):
        removed, sigs = inputs["removed"], inputs["sig"]
        by_survivor = removed | "BySurvivor" >> beam.Map(lambda kv: (kv[1], kv[0]))
        to_members = (
            {"sig": sigs, "members": by_survivor}
            | "JoinSurvivorSig" >> CoGroupInPartitions()
            | "SendSurvivorSig" >> beam.FlatMap(_survivor_sig_to_members)
        )
        return (
            {"sig": sigs, "survivor": to_members}
            | "JoinMemberSig" >> CoGroupInPartitions()
            | "Compare" >> beam.FlatMap(_close_to_survivor, self.min_similarity)
        )


def _both_directions(edge):
    a, b = edge
    if a != b:
        yield a, b
        yield b, a


def _propagate(kv):
    """One min-label round at node u: u keeps min(label(u), labels of its neighbours) next round."""
    node, grouped = kv
    labels = list(grouped["label"])
    if labels:
        label = min(labels)
        yield node, label
        for neighbour in grouped["adj"]:
            yield neighbour, label


def _label_to_neighbours(kv):
    node, grouped = kv
    labels = list(grouped["label"])
    if labels:
        for neighbour in grouped["adj"]:
            yield neighbour, labels[0]


def _disagreements(kv):
    """At node v: (label(u), label(v)) for every neighbour u whose label differs."""
    _, grouped = kv
    labels = list(grouped["label"])
    if labels:
        for other in grouped["from"]:
            if other != labels[0]:
                yield (min(other, labels[0]), max(other, labels[0]))


class _UnionLabels(beam.CombineFn):
    """Union-find over label pairs that still disagree: {label: final label}. Small in practice."""

    def create_accumulator(self):
        return []

    def add_input(self, acc, pair):
        acc.append(pair)
        return acc

    def merge_accumulators(self, accs):
        return [p for acc in accs for p in acc]

    def extract_output(self, acc):
        uf = minhash.UnionFind()
        for a, b in acc:
            uf.union(a, b)
        return uf.roots()


def _final_label(kv, fixes):
    node, label = kv
    root = fixes.get(label, label)
    if root != node:
        yield node, root


class ConnectedComponents(beam.PTransform):
    """Edges -> (node, smallest node of its component) for every node that is not that smallest one.

    `rounds` rounds of min-label propagation (each node takes the smallest label among itself and its
    neighbours) converge for components of diameter <= rounds. Then every edge whose two ends still
    disagree contributes the pair of labels; a union-find over those pairs (only labels of unfinished
    components, usually none) maps each label to its component's smallest node. Exact for any graph:
    nodes sharing a label are connected, and connected label groups must share a disagreeing edge."""

    def __init__(self, rounds: int = 4):
        super().__init__()
        self.rounds = rounds

    def expand(self, edges):
        adj = edges | "Adjacency" >> beam.FlatMap(_both_directions)
        labels = (
            adj | "Nodes" >> beam.Map(lambda kv: (kv[0], kv[0])) | "InitialLabels" >> beam.CombinePerKey(min)
        )
        for r in range(self.rounds):
            labels = (
                {"label": labels, "adj": adj}
                | f"Round{r}Join" >> beam.CoGroupByKey()
                | f"Round{r}Send" >> beam.FlatMap(_propagate)
                | f"Round{r}Min" >> beam.CombinePerKey(min)
            )
        sent = (
            {"label": labels, "adj": adj}
            | "SendLabels" >> beam.CoGroupByKey()
            | "LabelToNeighbours" >> beam.FlatMap(_label_to_neighbours)
        )
        fixes = (
            {"label": labels, "from": sent}
            | "CompareLabels" >> beam.CoGroupByKey()
            | "Disagreements" >> beam.FlatMap(_disagreements)
            | "UnionLabels" >> beam.CombineGlobally(_UnionLabels())
        )
        return labels | "FinalLabels" >> beam.FlatMap(_final_label, fixes=beam.pvalue.AsSingleton(fixes))


def _line_verdicts(kv, boilerplate_min_docs: int):
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
        Metrics.counter(NS, "lines/boilerplate_keys").inc()
        for doc_id in ids:
            yield doc_id, (key, "boilerplate_line")
    elif len(distinct) >= 2:
        Metrics.counter(NS, "lines/repeated_keys").inc()
        for doc_id in ids:
            if doc_id != smallest:
                yield doc_id, (key, "repeated_line")


class RepeatedLines(beam.PTransform):
    """C4-style: lines repeated across documents (see _line_verdicts)."""

    def __init__(self, boilerplate_min_docs: int):
        super().__init__()
        self.boilerplate_min_docs = boilerplate_min_docs

    def expand(self, occurrences):
        return (
            occurrences
            | "GroupByLine" >> GroupInPartitions()
            | "LineVerdicts" >> beam.FlatMap(_line_verdicts, self.boilerplate_min_docs)
        )


# --- all of it, on fingerprints ------------------------------------------------------------------------------


def _not_removed(kv, tag: str):
    """After CoGroupByKey({tag: values, 'exact': ..., 'near': ...}): the values of ids not removed."""
    doc_id, grouped = kv
    removed = any(True for _ in grouped.get("exact", ())) or any(True for _ in grouped.get("near", ()))
    first = next(iter(grouped[tag]), None)  # one value per id: duplicate ids are settled later
    if not removed and first is not None:
        yield doc_id, first


def _occurrences(kv):
    doc_id, keys = kv
    for key in keys:
        yield key, doc_id


class Deduplicate(beam.PTransform):
    """{"hashes": (text hash, id), "signatures": (id, signature), "lines": (id, [line hash])} ->
    (exact, near, line removals): (id, survivor), (id, survivor), (id, (line hash, reason)).

    Near-duplicates are searched among the documents exact dedup kept; repeated lines among the
    documents both kept. Only fingerprints travel: never a document's text."""

    def __init__(self, opts: CorpusOptions):
        super().__init__()
        self.opts = opts

    def expand(self, fingerprints):
        hashes, sigs, lines = fingerprints["hashes"], fingerprints["signatures"], fingerprints["lines"]
        exact = hashes | "Exact" >> ExactDuplicates()
        surviving_sigs = (
            {"sig": sigs, "exact": exact}
            | "JoinSigExact" >> CoGroupInPartitions()
            | "SigsOfSurvivors" >> beam.FlatMap(_not_removed, "sig")
        )
        near = surviving_sigs | "Near" >> NearDuplicates(self.opts)
        line_removals = (
            {"lines": lines, "exact": exact, "near": near}
            | "JoinLinesVerdicts" >> CoGroupInPartitions()
            | "LinesOfSurvivors" >> beam.FlatMap(_not_removed, "lines")
            | "Occurrences" >> beam.FlatMap(_occurrences)
            | "Repeated" >> RepeatedLines(self.opts.boilerplate_min_docs)
        )
        return exact, near, line_removals

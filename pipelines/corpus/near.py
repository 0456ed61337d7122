"""Near-duplicates: MinHash LSH whose signatures stay in the spill files (spill.py).

What travels is ids and handles, (text hash, spill stem, position), never a signature per band or per
join. A step that needs signatures groups its work by spill file and reads that file's signatures
whole (spill.Signatures): a few MB, in sequence.

PCollection shapes (id: document id str; handle: (text hash, stem, position)):

    NearDuplicates:       (id, handle) of the documents exact dedup kept -> (id, survivor id), removed only;
                          and tallies (tally.py) of the LSH buckets and of the survivor check
      by file             (stem, (id, position))                  -> LSH band entries (band key, id)
      GroupByBand         (band key, [id])                        -> candidate pairs (a, b), a < b
    ComparePairs:         {"pairs": (a, b), "handles": (id, handle)} -> the pairs whose signatures agree,
                                                                  tallies of the pairs that did not
    ConnectedComponents:  (id_a, id_b) edges                     -> (id, smallest id of its component)
"""

from __future__ import annotations

from functools import partial

import apache_beam as beam
import numpy as np

from pipelines.corpus import minhash
from pipelines.corpus.accounting import diagnostic_counter
from pipelines.corpus.grouping import CoGroupInPartitions, GroupInPartitions
from pipelines.corpus.options import CorpusOptions
from pipelines.corpus.spill import Signatures

BIG_BUCKET = 2000


def _by_file(kv):
    doc_id, (_, stem, position) = kv
    return ((stem, (doc_id, position)),)


def _band_entries(kv, sig_dir: str, sig_bytes: int, bands: int, rows: int):
    """(stem, [(id, position)]) -> (band key, id) for every band of every listed document."""
    stem, members = kv
    sigs = Signatures(sig_dir, stem, sig_bytes)
    for doc_id, position in members:
        sig = np.frombuffer(sigs.sig(position), dtype=np.uint32)
        for key in minhash.band_keys(sig, bands, rows):
            yield key, doc_id


def _bucket_candidates(kv, tally, window: int):
    """Candidate pairs (a, b), a < b, of one LSH bucket. Buckets up to BIG_BUCKET members: sorted by id,
    each member with its `window` predecessors. Larger ones (thousands of templated stubs sharing a
    band): every member with the smallest id."""
    _, members = kv
    ids = sorted(set(members))
    if 2 <= len(ids) <= BIG_BUCKET:
        tally.add(diagnostic_counter("lsh", "buckets_with_candidates"))
        for j in range(1, len(ids)):
            for i in range(max(0, j - window), j):
                yield ids[i], ids[j]
    elif len(ids) > BIG_BUCKET:
        tally.add(diagnostic_counter("lsh", "big_buckets"))
        for doc_id in ids[1:]:
            yield ids[0], doc_id


def _send_first(kv):
    """At a: (b, (a, stem of a, position of a)) for every distinct b paired with a."""
    a, grouped = kv
    if grouped["handles"]:
        _, stem, position = min(grouped["handles"])
        for b in sorted(set(grouped["pairs"])):
            yield b, (a, stem, position)


def _by_first_file(kv):
    """At b: (stem of a, (position of a, a, b, stem of b, position of b))."""
    b, grouped = kv
    if grouped["handles"]:
        _, stem_b, position_b = min(grouped["handles"])
        for a, stem_a, position_a in grouped["first"]:
            yield stem_a, (position_a, a, b, stem_b, position_b)


def _attach_first(kv, sig_dir: str, sig_bytes: int):
    stem, items = kv
    sigs = Signatures(sig_dir, stem, sig_bytes)
    for position_a, a, b, stem_b, position_b in items:
        yield stem_b, (position_b, a, b, sigs.sig(position_a))


def _compare(kv, tally, sig_dir: str, sig_bytes: int, threshold: float, far_counter: str):
    stem, items = kv
    sigs = Signatures(sig_dir, stem, sig_bytes)
    for position_b, a, b, sig_a in items:
        agree = minhash.estimate_jaccard(
            np.frombuffer(sig_a, dtype=np.uint32), np.frombuffer(sigs.sig(position_b), dtype=np.uint32)
        )
        if agree >= threshold:
            yield a, b
        elif far_counter:
            tally.add(far_counter)


class ComparePairs(beam.PTransform):
    """{"pairs": (a, b), "handles": (id, handle)} -> the pairs (a, b) whose signatures agree on >=
    threshold of the permutations (estimated Jaccard), and the tallies of `far_counter` (the pairs
    that did not; none without it). A pair listed twice is compared once per a. Two joins bring both
    handles to the pair; two passes by spill file bring both signatures."""

    def __init__(self, threshold: float, sig_dir: str, sig_bytes: int, far_counter: str = ""):
        super().__init__()
        self.threshold, self.sig_dir, self.sig_bytes, self.far_counter = (
            threshold,
            sig_dir,
            sig_bytes,
            far_counter,
        )

    def expand(self, inputs):
        handles = inputs["handles"]
        first = {"handles": handles, "pairs": inputs["pairs"]} | "JoinFirst" >> CoGroupInPartitions(
            then=_send_first
        )
        attach = partial(_attach_first, sig_dir=self.sig_dir, sig_bytes=self.sig_bytes)
        compare = partial(
            _compare,
            sig_dir=self.sig_dir,
            sig_bytes=self.sig_bytes,
            threshold=self.threshold,
            far_counter=self.far_counter,
        )
        return (
            {"handles": handles, "first": first}
            | "JoinSecond" >> CoGroupInPartitions(then=_by_first_file)
            | "GroupByFirstFile" >> GroupInPartitions(then=attach)
            | "GroupBySecondFile" >> GroupInPartitions(then=compare, counted=True)
        )


class NearDuplicates(beam.PTransform):
    """MinHash LSH: documents sharing a band become candidates, candidates whose signatures agree on
    >= near_dup_threshold of the permutations are linked, linked documents form clusters (connected
    components) and the smallest id of each cluster survives. With min_survivor_similarity > 0, a
    document is only removed when it is itself that similar to its survivor (clusters chain)."""

    def __init__(self, opts: CorpusOptions, sig_dir: str):
        super().__init__()
        self.opts, self.sig_dir = opts, sig_dir

    def expand(self, handles):
        dedup = self.opts.dedup
        size = dedup.num_perm * 4  # bytes of a signature
        bands = partial(
            _band_entries,
            sig_dir=self.sig_dir,
            sig_bytes=size,
            bands=dedup.minhash_bands,
            rows=dedup.minhash_rows,
        )
        candidates, bucket_tallies = (
            handles
            | "GroupByFile" >> GroupInPartitions(explode=_by_file)
            | "GroupByBand"
            >> GroupInPartitions(
                explode=bands, then=partial(_bucket_candidates, window=dedup.max_bucket_pairs), counted=True
            )
        )
        edges, _ = {"pairs": candidates, "handles": handles} | "Verify" >> ComparePairs(
            dedup.near_dup_threshold, self.sig_dir, size
        )
        removed = edges | "Clusters" >> ConnectedComponents(dedup.cc_rounds)
        if dedup.min_survivor_similarity <= 0:
            return removed, bucket_tallies
        checked, far = {"pairs": removed, "handles": handles} | "CheckSurvivors" >> ComparePairs(
            dedup.min_survivor_similarity,
            self.sig_dir,
            size,
            diagnostic_counter("near_dup", "kept_far_from_survivor"),
        )
        return checked, (bucket_tallies, far) | "Tallies" >> beam.Flatten()


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

"""GroupByKey and CoGroupByKey for many small elements: batches travel through the shuffle, not elements.

Deduplication groups tens of entries per document (20 LSH band keys, one entry per line) and joins a
few per document (signatures, line lists, verdicts). Through a plain GroupByKey every entry is an
element, and a runner pays per element: the local runner holds each grouped value as Python objects
(a 30-byte entry costs ~250 bytes of tuples, ints and strings), and every runner encodes, sends and
decodes them one by one.

Here each worker buffers its entries per partition (a deterministic hash of the key, PARTITIONS of
them) and emits one batch per partition, encoded as one bytes object (marshal: our own entries of
tuples, strings, bytes and numbers, made and read inside the same run), every FLUSH_ENTRIES entries and
at the end of its bundle. Only the partitions are grouped (a few hundred keys); one worker regroups one
partition by key in memory. Output, as GroupByKey / CoGroupByKey give it:

    GroupInPartitions:    (key, value)                 -> (key, [values])
    CoGroupInPartitions:  {tag: (key, value)}          -> (key, {tag: [values]})   every tag present

A step that turns one element into many entries (a document into its 20 band keys or its lines) or
one group into its results should not make each of them a Beam element: every element costs a call
per step it passes, and where a step reads the output of several others (a Flatten) it is encoded and
decoded once more. So both transforms take

    explode(element) -> iterable of (key, value) entries      run inside the batching step
    then((key, grouped)) -> iterable of outputs                run inside the regrouping step

and the entries and groups in between are never Beam elements. With `counted=True`, `then` is called
as then((key, grouped), tally=...) with the tally.Tally of its bundle, and the transform returns
(outputs, tallies): the counts of a group are pipeline data like every other count of the stage.
Each input collection of a
CoGroupInPartitions is batched on its own (its tag written once per batch), and only the batches are
flattened.

Keys must be of one type in a collection (ints, strings, tuples of them): partitions are regrouped in
key order, so reruns give the same order. Memory per worker: FLUSH_ENTRIES buffered entries per input,
or one partition's entries (1/PARTITIONS of all) when regrouping.
"""

from __future__ import annotations

import marshal
from functools import partial

import apache_beam as beam
import xxhash
from apache_beam.transforms.window import GlobalWindows

from pipelines.corpus.tally import TALLY, Tally

PARTITIONS = 256
FLUSH_ENTRIES = 5_000


_MASK64 = (1 << 64) - 1


def _key_hash(key) -> int:
    """A 64-bit hash of a key that every process agrees on (Python's str hash differs per process)."""
    kind = type(key)
    if kind is int:
        return key
    if kind is str:
        return xxhash.xxh64_intdigest(key.encode("utf-8"))
    if kind is tuple:
        h = len(key)
        for part in key:
            h = (h * 1_000_003 + _key_hash(part)) & _MASK64
        return h
    if kind is bytes:
        return xxhash.xxh64_intdigest(key)
    return xxhash.xxh64_intdigest(repr(key).encode("utf-8"))


def partition_of(key, partitions: int) -> int:
    return _key_hash(key) % partitions


def _one(element):
    return (element,)


class _Batch(beam.DoFn):
    """Elements of one input -> (partition, marshalled (tag, [(key, value), ...])) batches, with the
    entries of each element from explode(element)."""

    def __init__(self, tag: str, partitions: int, flush: int, explode):
        self.tag, self.partitions, self.flush, self.explode = tag, partitions, flush, explode or _one
        self.buffer: dict[int, list] = {}
        self.size = 0

    def start_bundle(self):
        self.buffer, self.size = {}, 0

    def _drain(self):
        batches, self.buffer, self.size = self.buffer, {}, 0
        return [
            (partition, marshal.dumps((self.tag, entries))) for partition, entries in sorted(batches.items())
        ]

    def process(self, element):
        buffer, partitions = self.buffer, self.partitions
        for entry in self.explode(element):
            partition = _key_hash(entry[0]) % partitions
            entries = buffer.get(partition)
            if entries is None:
                entries = buffer[partition] = []
            entries.append(entry)
            self.size += 1
            if self.size >= self.flush:
                yield from self._drain()
                buffer = self.buffer

    def finish_bundle(self):
        for batch in self._drain():
            yield GlobalWindows.windowed_value(batch)


def _regroup(kv, tags: tuple | None, then):
    """(partition, [batch]) -> then((key, grouped)) for every key of the partition, in key order (with
    no `then`: the pairs themselves). grouped is {tag: [values]} for a join of `tags`, the list of
    values for one input (tags None)."""
    _, batches = kv
    groups: dict = {}
    for batch in batches:
        tag, entries = marshal.loads(batch)
        for key, value in entries:
            values = groups.get(key)
            if values is None:
                values = groups[key] = []
            values.append(value if tags is None else (tag, value))
    for key in sorted(groups):
        grouped = groups.pop(key)
        if tags is not None:
            by_tag = {name: [] for name in tags}
            for tag, value in grouped:
                by_tag[tag].append(value)
            grouped = by_tag
        if then is None:
            yield key, grouped
        else:
            yield from then((key, grouped))


class _CountedRegroup(beam.DoFn):
    """_regroup with then((key, grouped), tally=<the bundle's Tally>): its counts to the TALLY output."""

    def __init__(self, tags: tuple | None, then):
        self.tags, self.then = tags, then

    def start_bundle(self):
        self.tally = Tally()
        self.counted_then = partial(self.then, tally=self.tally)

    def process(self, kv):
        yield from _regroup(kv, self.tags, self.counted_then)

    def finish_bundle(self):
        yield from self.tally.emit()


def _grouped(
    inputs: dict, partitions: int, flush: int, explode: dict, tags: tuple | None, then, counted: bool
):
    """{tag: PCollection} -> batches per input -> one GroupByKey of the partitions -> regroup; counted:
    (outputs, tallies)."""
    batches = [
        pcoll | f"Batch{tag}" >> beam.ParDo(_Batch(tag, partitions, flush, explode.get(tag)))
        for tag, pcoll in inputs.items()
    ]
    groups = batches | "Batches" >> beam.Flatten() | "GroupPartitions" >> beam.GroupByKey()
    if not counted:
        return groups | "Regroup" >> beam.FlatMap(_regroup, tags, then)
    out = groups | "Regroup" >> beam.ParDo(_CountedRegroup(tags, then)).with_outputs(TALLY, main="out")
    return out.out, out[TALLY]


class CoGroupInPartitions(beam.PTransform):
    """{tag: (key, value)} -> (key, {tag: [values]}), like CoGroupByKey (module docstring); with
    `explode` ({tag: function}), `then` and `counted`, see there."""

    def __init__(
        self,
        partitions: int = PARTITIONS,
        flush: int = FLUSH_ENTRIES,
        explode: dict | None = None,
        then=None,
        counted: bool = False,
    ):
        super().__init__()
        self.partitions, self.flush, self.explode, self.then = partitions, flush, explode or {}, then
        self.counted = counted

    def expand(self, inputs: dict):
        return _grouped(
            inputs, self.partitions, self.flush, self.explode, tuple(inputs), self.then, self.counted
        )


class GroupInPartitions(beam.PTransform):
    """(key, value) -> (key, [values]), like GroupByKey (module docstring); with `explode`, `then` and
    `counted`, see there."""

    def __init__(
        self,
        partitions: int = PARTITIONS,
        flush: int = FLUSH_ENTRIES,
        explode=None,
        then=None,
        counted: bool = False,
    ):
        super().__init__()
        self.partitions, self.flush, self.explode, self.then = partitions, flush, explode, then
        self.counted = counted

    def expand(self, pairs):
        explode = {"values": self.explode}
        return _grouped(
            {"values": pairs}, self.partitions, self.flush, explode, None, self.then, self.counted
        )

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

Keys must be of one type in a collection (ints, strings, tuples of them): partitions are regrouped in
key order, so reruns give the same order. Memory per worker: FLUSH_ENTRIES buffered entries, or one
partition's entries (1/PARTITIONS of all) when regrouping.
"""

from __future__ import annotations

import marshal

import apache_beam as beam
import xxhash
from apache_beam.transforms.window import GlobalWindows

PARTITIONS = 256
FLUSH_ENTRIES = 5_000


def partition_of(key, partitions: int) -> int:
    """A hash of the key that every process agrees on (Python's str hash differs per process)."""
    if isinstance(key, int):
        return key % partitions
    return xxhash.xxh64_intdigest(repr(key).encode("utf-8")) % partitions


class _Batch(beam.DoFn):
    """(key, tag, value) entries -> (partition, marshalled [(key, tag, value), ...]) batches."""

    def __init__(self, partitions: int, flush: int):
        self.partitions, self.flush = partitions, flush
        self.buffer: dict[int, list] = {}
        self.size = 0

    def start_bundle(self):
        self.buffer, self.size = {}, 0

    def _drain(self):
        batches, self.buffer, self.size = self.buffer, {}, 0
        return [(p, marshal.dumps(entries)) for p, entries in sorted(batches.items())]

    def process(self, entry):
        self.buffer.setdefault(partition_of(entry[0], self.partitions), []).append(entry)
        self.size += 1
        if self.size >= self.flush:
            yield from self._drain()

    def finish_bundle(self):
        for batch in self._drain():
            yield GlobalWindows.windowed_value(batch)


def _regroup(kv, tags: tuple):
    """(partition, [batch]) -> (key, {tag: [values]}) for every key of the partition, in key order."""
    _, batches = kv
    groups: dict = {}
    for batch in batches:
        for key, tag, value in marshal.loads(batch):
            group = groups.get(key)
            if group is None:
                group = groups[key] = {t: [] for t in tags}
            group[tag].append(value)
    for key in sorted(groups):
        yield key, groups[key]


def _tag(kv, tag):
    return kv[0], tag, kv[1]


class CoGroupInPartitions(beam.PTransform):
    """{tag: (key, value)} -> (key, {tag: [values]}), like CoGroupByKey (module docstring)."""

    def __init__(self, partitions: int = PARTITIONS, flush: int = FLUSH_ENTRIES):
        super().__init__()
        self.partitions, self.flush = partitions, flush

    def expand(self, inputs: dict):
        tags = tuple(inputs)
        tagged = [pcoll | f"Tag{tag}" >> beam.Map(_tag, tag) for tag, pcoll in inputs.items()]
        return (
            tagged
            | "Entries" >> beam.Flatten()
            | "Batch" >> beam.ParDo(_Batch(self.partitions, self.flush))
            | "GroupPartitions" >> beam.GroupByKey()
            | "Regroup" >> beam.FlatMap(_regroup, tags)
        )


def _values(kv):
    return kv[0], kv[1]["values"]


class GroupInPartitions(beam.PTransform):
    """(key, value) -> (key, [values]), like GroupByKey (module docstring)."""

    def __init__(self, partitions: int = PARTITIONS, flush: int = FLUSH_ENTRIES):
        super().__init__()
        self.partitions, self.flush = partitions, flush

    def expand(self, pairs):
        return (
            {"values": pairs}
            | "Group" >> CoGroupInPartitions(self.partitions, self.flush)
            | "Values" >> beam.Map(_values)
        )

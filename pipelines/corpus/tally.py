"""The corpus stage's counts as pipeline data: what stats.json is built from (accounting.py names them).

A DoFn that counts sums its counts per bundle in a `Tally` and emits them once, in finish_bundle, as
one {name: count} element of its TALLY output. `TotalCounts` sums every tally of the stage into one
dict, which pipeline.py writes beside the shards' summaries for the launcher (stage.py) to read.

Why data and not Beam counters: a runner keeps a bundle's outputs only if the bundle commits, and
drops those of a failed or retried attempt, so counts that travel as elements are exact on any runner
and under retries (Dataflow's attempted counters may count a retried bundle twice). A runner without
metrics (Beam's DaskRunner: its result's metrics() raises NotImplementedError) runs the stage to its
manifest. The same counts still go to Beam counters of the same names, once per bundle: for a
runner's monitoring UI only, never read back.

    DoFn:        tally.add(name, n) ... ; finish_bundle: yield from tally.emit()  -> TALLY: {name: n}
    TotalCounts: (PCollection of {name: n}, ...)                                   -> one {name: n}
"""

from __future__ import annotations

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindows

from pipelines.corpus.accounting import add_counts, increment, rejected_counter_of, weight

TALLY = "tally"  # the tagged output of a counting DoFn: one {name: count} dict per bundle


class Tally:
    """The counts of one bundle of a DoFn: `add` them while processing, `yield from emit()` in
    finish_bundle. A name added is in the counts even when its amount is 0, as a Beam counter
    incremented by 0 is (stats.json keeps such zeros): skip a 0 before `add` where it should not
    show. Summing per bundle also spares the Beam counter increments (about 3 us each) that the
    per-document statistics would otherwise pay several times a document."""

    def __init__(self):
        self.counts: dict[str, int] = {}

    def add(self, name: str, amount: int = 1) -> None:
        self.counts[name] = self.counts.get(name, 0) + amount

    def add_rejected(self, rec: dict) -> None:
        """A rejected record (clean.rejected, readers/error_records.py), by the records it stands for."""
        self.add(rejected_counter_of(rec), weight(rec))

    def emit(self):
        """The bundle's counts as one element of the TALLY output (what finish_bundle outputs is a
        windowed value), and to the Beam counters; then a fresh start for the next bundle."""
        counts, self.counts = self.counts, {}
        for name, amount in counts.items():
            increment(name, amount)
        if counts:
            yield beam.pvalue.TaggedOutput(TALLY, GlobalWindows.windowed_value(counts))


class SumCounts(beam.CombineFn):
    """Tallies ({name: count}) -> their sum, whatever the bundles were."""

    def create_accumulator(self):
        return {}

    def add_input(self, acc, counts):
        return add_counts(acc, counts)

    def merge_accumulators(self, accs):
        total: dict[str, int] = {}
        for acc in accs:
            add_counts(total, acc)
        return total

    def extract_output(self, acc):
        return acc


class TotalCounts(beam.PTransform):
    """(PCollection of tallies, ...) -> a PCollection of one dict, their sum (none when no tally came:
    read it with AsSingleton(..., default_value={})). A tuple, not a list: Beam takes a list applied
    to a composite transform for a value to Create."""

    def expand(self, tallies):
        return (
            tallies
            | "AllTallies" >> beam.Flatten()
            | "Sum" >> beam.CombineGlobally(SumCounts()).without_defaults()
        )

"""The accounting of the corpus stage: its counts (namespace, names, the one parser), the counts ->
stats.json, the checks that the counts, the files written and the multistream indexes agree, and
whether the outcome may be published.

The counts are pipeline data, not runner metrics (tally.py): each DoFn that counts emits its counts per
bundle as elements of a TALLY output, the stage sums them and writes the total beside the shards'
summaries, where the launcher reads it. They are exact on any runner and under retries. The same counts
also go to Beam counters of the same names, for monitoring only (`increment`): never read back into
stats.json.

Count names (one builder each below; `parse_counter` is their only reader):

    read/<source>                 records read (a dead letter of lost records counts as that many)
    kept/<source>                 documents kept (counted in the final pass; checked against the
                                  docs shards' summaries)
    dropped/<source>/<reason>     records a rule dropped          (reason: the rest of the name)
    dead_letter/<source>/<reason> records that could not be used  (reason: the rest of the name)
    lines_removed/<rule>          lines a cleaning or dedup rule removed
    file/<count>/KIND:NAME        per input file, count one of FILE_COUNTS (NAME may hold folders)
    chars/<read|kept>/<source>    characters of the records read (raw text, markup included) and of
                                  the documents written
    length/<before|after>/<bucket>
                                  records read by raw length, documents written by length, in
                                  power-of-2 buckets named by their lower bound (`length_bucket`)
    language/<lang>               documents by the language identified (langid.py)
    pii/<kind>                    personal data replaced (or found, in drop mode) by kind (pii.py)
    near_cluster/<size>           near-duplicate clusters by size, survivor included
    index_unreadable/<kind>, lines/<what>, lsh/<what>, near_dup/<what>
                                  diagnostics: stats.json `other`, by their full name

A source, a rule and a diagnostic are single words (no `/`); a name of no family above is refused
(ValueError), never filed somewhere it was not meant to go. The same names key the shards'
summaries (`kept/<source>`, `dropped|dead_letter/<source>/<reason>`).

stats.json holds only what the inputs determine (its hash keys the downstream stages): no run time.
"""

from __future__ import annotations

from typing import NamedTuple

from apache_beam.metrics import Metrics
from apache_beam.metrics.metric import MetricsFilter

from core import storage
from core.errors import StageFailed
from pipelines.corpus.input_checks import check_inputs
from pipelines.corpus.readers.ids import natural_key
from pipelines.dead_letter_limit import check_dead_letter_limit

NS = "corpus"

READ, KEPT, DROPPED, DEAD_LETTER, LINES_REMOVED, FILE = (
    "read",
    "kept",
    "dropped",
    "dead_letter",
    "lines_removed",
    "file",
)
CHARS, LENGTH, LANGUAGE, PII, NEAR_CLUSTER = "chars", "length", "language", "pii", "near_cluster"
CHAR_COUNTS = ("read", "kept")
LENGTHS = ("before", "after")
MAX_LENGTH_BUCKET = 1 << 20  # the last bucket holds every length from 2^20 characters up
FILE_COUNTS = ("read", "listed", "lost_records", "lost_estimated", "lost_bytes", "lost_rest_unknown")
DIAGNOSTICS = ("index_unreadable", "lines", "lsh", "near_dup")  # stats.json `other`
LOST_IDS_IN_STATS = 1000  # per file; every one is in the rejected records


# --- counter names ----------------------------------------------------------------------------------------


def _word(value: str, what: str) -> str:
    if not value or "/" in value:
        raise ValueError(f"a counter's {what} must be a non-empty word without '/', not {value!r}")
    return value


def read_counter(source: str) -> str:
    return f"{READ}/{_word(source, 'source')}"


def kept_counter(source: str) -> str:
    return f"{KEPT}/{_word(source, 'source')}"


def rejected_counter(source: str, reason: str, dead_letter: bool) -> str:
    """`dead_letter/<source>/<reason>` or `dropped/<source>/<reason>`."""
    if not reason:
        raise ValueError("a rejected record's counter needs a reason")
    return f"{DEAD_LETTER if dead_letter else DROPPED}/{_word(source, 'source')}/{reason}"


def rejected_counter_of(rec: dict) -> str:
    """The counter of a rejected record (clean.rejected, readers/error_records.py)."""
    return rejected_counter(rec["source"], rec["reason"], rec["dead_letter"])


def lines_removed_counter(rule: str) -> str:
    return f"{LINES_REMOVED}/{_word(rule, 'rule')}"


def file_counter(count: str, file_key: str) -> str:
    """`file/<count>/KIND:NAME` (readers/ids.py file_key)."""
    if count not in FILE_COUNTS:
        raise ValueError(f"unknown per-file count {count!r} (one of {', '.join(FILE_COUNTS)})")
    if not file_key:
        raise ValueError("a per-file counter needs the file's key")
    return f"{FILE}/{count}/{file_key}"


def length_bucket(chars: int) -> int:
    """The lower bound of the power-of-2 bucket of a length: 0, 1, 2 (2-3), 4 (4-7), ... 2^20 (and up)."""
    if chars <= 0:
        return 0
    return min(1 << (chars.bit_length() - 1), MAX_LENGTH_BUCKET)


def _one_of(value: str, allowed: tuple[str, ...], what: str) -> str:
    if value not in allowed:
        raise ValueError(f"unknown {what} {value!r} (one of {', '.join(allowed)})")
    return value


def chars_counter(count: str, source: str) -> str:
    """`chars/read/<source>` (raw characters of the records read) or `chars/kept/<source>`."""
    return f"{CHARS}/{_one_of(count, CHAR_COUNTS, 'character count')}/{_word(source, 'source')}"


def length_counter(when: str, chars: int) -> str:
    """`length/before/<bucket>` (a record read) or `length/after/<bucket>` (a document written)."""
    return f"{LENGTH}/{_one_of(when, LENGTHS, 'length histogram')}/{length_bucket(chars)}"


def language_counter(language: str) -> str:
    return f"{LANGUAGE}/{_word(language, 'language')}"


def pii_counter(kind: str) -> str:
    return f"{PII}/{_word(kind, 'kind')}"


def near_cluster_counter(size: int) -> str:
    if size < 2:
        raise ValueError(f"a near-duplicate cluster has at least 2 members, not {size}")
    return f"{NEAR_CLUSTER}/{size}"


def diagnostic_counter(family: str, what: str) -> str:
    return f"{_one_of(family, DIAGNOSTICS, 'diagnostic counter family')}/{_word(what, 'name')}"


def increment(name: str, amount: int = 1) -> None:
    """Increment the Beam counter `name` (namespace `corpus`): monitoring only, see the module
    docstring. Every count of the stage goes through a tally.Tally, which calls this once per bundle."""
    Metrics.counter(NS, name).inc(amount)


def add_counts(total: dict[str, int], counts: dict[str, int]) -> dict[str, int]:
    """total += counts, name by name (in place; returns total)."""
    for name, amount in counts.items():
        total[name] = total.get(name, 0) + amount
    return total


def weight(rec: dict) -> int:
    """How many records a rejected record stands for: 1, or the records a dead letter of damaged
    input lost (readers/error_records.py)."""
    return rec["lost"]["records"] if "lost" in rec else 1


class CounterName(NamedTuple):
    """A counter name, parsed. `source` for read/kept/dropped/dead_letter; `detail`: the reason
    (dropped, dead_letter), rule (lines_removed), count (file) or what a diagnostic counts; `file`:
    the file key KIND:NAME of a per-file count; `bucket`: a length bucket's lower bound, or a
    near-duplicate cluster's size."""

    family: str
    source: str = ""
    detail: str = ""
    file: str = ""
    bucket: int = 0


def parse_counter(name: str) -> CounterName:
    """The one reader of the names above. ValueError on a name of no known family or of the wrong
    shape (a new family must be taught here, and to stats_from_counts, before it is counted)."""
    family, _, rest = name.partition("/")
    try:
        if family in (READ, KEPT):
            return CounterName(family, source=_word(rest, "source"))
        if family in (DROPPED, DEAD_LETTER):
            source, _, reason = rest.partition("/")
            if not reason:
                raise ValueError("no reason")
            return CounterName(family, source=_word(source, "source"), detail=reason)
        if family == LINES_REMOVED:
            return CounterName(family, detail=_word(rest, "rule"))
        if family == FILE:
            count, _, key = rest.partition("/")
            if count not in FILE_COUNTS or not key:
                raise ValueError(f"per-file count {count!r} of {key!r}")
            return CounterName(family, detail=count, file=key)
        if family == CHARS:
            count, _, source = rest.partition("/")
            if count not in CHAR_COUNTS:
                raise ValueError(f"character count {count!r}")
            return CounterName(family, source=_word(source, "source"), detail=count)
        if family == LENGTH:
            when, _, bucket = rest.partition("/")
            if when not in LENGTHS or not bucket.isdigit():
                raise ValueError(f"length histogram {when!r}, bucket {bucket!r}")
            return CounterName(family, detail=when, bucket=int(bucket))
        if family in (LANGUAGE, PII):
            return CounterName(family, detail=_word(rest, "name"))
        if family == NEAR_CLUSTER:
            if not rest.isdigit():
                raise ValueError(f"size {rest!r}")
            return CounterName(family, bucket=int(rest))
        if family in DIAGNOSTICS:
            return CounterName(family, detail=_word(rest, "name"))
    except ValueError as err:
        raise ValueError(f"corpus counter {name!r} is not of its family's shape ({err})") from None
    raise ValueError(f"corpus counter {name!r} is of no known family (accounting.py lists them)")


# --- stats.json ---------------------------------------------------------------------------------------------


def counters_from_result(result) -> dict[str, int]:
    """The Beam counters of a finished run (monitoring: committed where the runner has them, else
    attempted, which may count a retried bundle twice). Never the source of stats.json; tests check
    on the DirectRunner that they equal the stage's own counts."""
    out = {}
    for c in result.metrics().query(MetricsFilter().with_namespace(NS))["counters"]:
        value = c.committed if c.committed is not None else c.attempted
        out[c.key.metric.name] = out.get(c.key.metric.name, 0) + int(value or 0)
    return out


def stats_from_counts(counts: dict[str, int]) -> dict:
    """The stage's counts ({name: count}, the sum of its tallies) -> stats.json: totals, per reason,
    per source, per input file (a dump with its index, a file that lost records to damage: `files`,
    keyed KIND:NAME), and the accounting invariants: read = kept + sum(dropped by reason) + dead letter; for a dump with its multistream
    index, pages the index lists = pages read + pages lost, per dump.

    `read` counts every record of the inputs as far as it is known: the ones read, and the ones that
    damaged input lost (dead letters, readers/error_records.py); `lost` says how many of those were lost,
    how many of them are estimates (no index to name them), and the compressed bytes lost."""
    stats = {
        "read": 0,
        "kept": 0,
        "dropped": {},
        "dead_letter": {},
        "by_source": {},
        "lines_removed": {},
        "files": {},
        "chars": {count: {} for count in CHAR_COUNTS},
        "length_hist": {when: {} for when in LENGTHS},
        "languages": {},
        "pii": {},
        "near_dup_clusters": {},
        "other": {},
    }

    def src(name):
        return stats["by_source"].setdefault(name, {"read": 0, "kept": 0, "dropped": {}, "dead_letter": {}})

    for name, value in sorted(counts.items()):
        counter = parse_counter(name)
        if counter.family in (READ, KEPT):
            stats[counter.family] += value
            src(counter.source)[counter.family] += value
        elif counter.family in (DROPPED, DEAD_LETTER):
            totals = stats[counter.family]
            totals[counter.detail] = totals.get(counter.detail, 0) + value
            src(counter.source)[counter.family][counter.detail] = value
        elif counter.family == LINES_REMOVED:
            stats["lines_removed"][counter.detail] = value
        elif counter.family == FILE:
            stats["files"].setdefault(counter.file, {})[counter.detail] = value
        elif counter.family == CHARS:
            stats["chars"][counter.detail][counter.source] = value
        elif counter.family == LENGTH:
            stats["length_hist"][counter.detail][counter.bucket] = value
        elif counter.family == LANGUAGE:
            stats["languages"][counter.detail] = value
        elif counter.family == PII:
            stats["pii"][counter.detail] = value
        elif counter.family == NEAR_CLUSTER:
            stats["near_dup_clusters"][counter.bucket] = value
        else:  # a diagnostic, by its full name
            stats["other"][name] = value
    # numeric keys in numeric order, as strings (JSON keys): "0", "1", "2", "4", ... and cluster sizes
    for when in LENGTHS:
        stats["length_hist"][when] = {str(k): v for k, v in sorted(stats["length_hist"][when].items())}
    stats["near_dup_clusters"] = {str(k): v for k, v in sorted(stats["near_dup_clusters"].items())}
    dropped, dead = sum(stats["dropped"].values()), sum(stats["dead_letter"].values())
    stats["dropped_total"], stats["dead_letter_total"] = dropped, dead
    for entry in stats["files"].values():
        lost = {k: entry.pop(f"lost_{k}", 0) for k in ("records", "estimated", "bytes", "rest_unknown")}
        if any(lost.values()):
            entry["lost"] = lost
    stats["lost"] = {
        k: sum(e.get("lost", {}).get(k, 0) for e in stats["files"].values())
        for k in ("records", "estimated", "bytes")
    }
    stats["invariant"] = {
        "rule": "read = kept + dropped_total + dead_letter_total",
        "read": stats["read"],
        "accounted": stats["kept"] + dropped + dead,
        "holds": stats["read"] == stats["kept"] + dropped + dead,
    }
    mismatches = {
        key: {"listed": e["listed"], "read": e.get("read", 0)}
        for key, e in stats["files"].items()
        if "listed" in e and e["listed"] != e.get("read", 0)
    }
    stats["index_invariant"] = {
        "rule": "per dump with its index: pages listed = pages read + pages lost (read counts both)",
        "holds": not mismatches,
        "mismatches": mismatches,
    }
    return stats


def add_lost_ids(stats: dict, summaries: list[dict]) -> None:
    """The ids of the records lost to damage, per file (from the rejected shards' summaries), into
    stats["files"]: the first LOST_IDS_IN_STATS in natural order."""
    ids: dict[str, list[str]] = {}
    for summary in summaries:
        for key, found in summary.get("lost_ids", {}).items():
            ids.setdefault(key, []).extend(found)
    for key, found in sorted(ids.items()):
        lost = stats["files"].setdefault(key, {}).setdefault("lost", {})
        lost["ids"] = sorted(found, key=natural_key)[:LOST_IDS_IN_STATS]


def accounting_problems(stats: dict, written: dict[str, int]) -> list[str]:
    """How the stage's counts and the files written (`written`: counts by key of the shards'
    summaries) disagree, and dumps whose index lists other pages than were read and lost."""
    kept_written = sum(v for k, v in written.items() if parse_counter(k).family == KEPT)
    rejected_written = sum(v for k, v in written.items() if parse_counter(k).family != KEPT)
    problems = []
    if not stats["invariant"]["holds"]:
        problems.append(f"read {stats['read']} != accounted {stats['invariant']['accounted']}")
    if kept_written != stats["kept"]:
        problems.append(f"docs shards hold {kept_written} documents, the final pass kept {stats['kept']}")
    rejected = stats["dropped_total"] + stats["dead_letter_total"]
    if rejected_written != rejected:
        problems.append(f"rejected shards hold {rejected_written} records, the stage rejected {rejected}")
    for key, m in stats["index_invariant"]["mismatches"].items():
        problems.append(
            f"the index of {key} lists {m['listed']} pages, the dump held {m['read']} (read and lost): "
            "is it this dump's index?"
        )
    return problems


def lost_summary(stats: dict) -> dict:
    """What damaged input lost, per file (the summary `albert corpus` prints): records (pages),
    compressed bytes, and whether the count is an estimate or the file ends early."""
    out = {}
    for key, entry in sorted(stats["files"].items()):
        lost = entry.get("lost")
        if lost and (lost.get("records") or lost.get("bytes") or lost.get("rest_unknown")):
            out[key] = {"records": lost["records"], "bytes": lost["bytes"]}
            if lost["estimated"]:
                out[key]["estimated"] = lost["estimated"]
            if lost["rest_unknown"]:
                out[key]["rest_unknown"] = True
    return out


def _lost_note(stats: dict) -> str:
    parts = [
        f"{key}: {v['records']}{' (estimated)' if v.get('estimated') else ''} records, {v['bytes']} bytes"
        + (", and an unknown rest (the file ends early)" if v.get("rest_unknown") else "")
        for key, v in lost_summary(stats).items()
    ]
    return "damaged input lost " + "; ".join(parts) if parts else ""


def check_outcome(
    stats: dict, out_dir: str, max_dead_letter_fraction: float, accept_cut_inputs: bool = False
) -> None:
    """StageFailed when the run must not be published: the sources yielded no record, an input was
    not read as hashed or lost a rest of unknown size (input_checks.py), too much went to the dead
    letter (the message names the commonest reason), or no document was kept."""
    read = stats["read"]
    if read == 0:
        raise StageFailed("the sources yielded no record (empty files?); no manifest written")
    check_inputs(stats, out_dir, lost_summary(stats), accept_cut_inputs)
    check_dead_letter_limit(
        stats["dead_letter"],
        read,
        max_dead_letter_fraction,
        "records",
        storage.join(out_dir, "rejected-*.jsonl.gz"),
        note=_lost_note(stats),
    )
    if stats["kept"] == 0:
        by_count = sorted(stats["dropped"].items(), key=lambda kv: -kv[1])
        dropped = ", ".join(f"{reason} {count}" for reason, count in by_count)
        raise StageFailed(
            f"no document kept of {read} read (dropped: {dropped}); check the inputs or loosen the "
            f"filters (e.g. --min-chars, --min-cjk-ratio); no manifest written"
        )


def counts_from_summaries(summaries: list[dict]) -> dict[str, int]:
    total: dict[str, int] = {}
    for summary in summaries:
        add_counts(total, summary["counts"])
    return total

"""The accounting of the corpus stage: the Beam counters -> stats.json, the checks that the counters,
the files written and the multistream indexes agree, and whether the outcome may be published.

stats.json holds only what the inputs determine (its hash keys the downstream stages): no run time.
"""

from __future__ import annotations

from apache_beam.metrics.metric import MetricsFilter

from core import storage
from core.errors import StageFailed
from pipelines.corpus.dedup import NS
from pipelines.corpus.finalize import natural_key
from pipelines.deadletter import check_dead_letters


def counters_from_result(result) -> dict[str, int]:
    out = {}
    for c in result.metrics().query(MetricsFilter().with_namespace(NS))["counters"]:
        value = c.committed if c.committed is not None else c.attempted
        out[c.key.metric.name] = out.get(c.key.metric.name, 0) + int(value or 0)
    return out


FILE_COUNTS = ("read", "listed", "lost_records", "lost_estimated", "lost_bytes", "lost_rest_unknown")
LOST_IDS_IN_STATS = 1000  # per file; every one is in the rejected records


def stats_from_counters(counters: dict[str, int]) -> dict:
    """Counters -> stats.json: totals, per reason, per source, per input file (a dump with its index,
    a file that lost records to damage: `files`, keyed KIND:NAME), and the accounting
    invariants: read = kept + sum(dropped by reason) + dead letter; for a dump with its multistream
    index, pages the index lists = pages read + pages lost, per dump.

    `read` counts every record of the inputs as far as it is known: the ones read, and the ones that
    damaged input lost (dead letters, readers/errors.py); `lost` says how many of those were lost,
    how many of them are estimates (no index to name them), and the compressed bytes lost."""
    stats = {
        "read": 0,
        "kept": 0,
        "dropped": {},
        "dead_letter": {},
        "by_source": {},
        "lines_removed": {},
        "files": {},
        "other": {},
    }

    def src(name):
        return stats["by_source"].setdefault(name, {"read": 0, "kept": 0, "dropped": {}, "dead_letter": {}})

    for name, value in sorted(counters.items()):
        parts = name.split("/")
        if parts[0] in ("read", "kept") and len(parts) == 2:
            stats[parts[0]] += value
            src(parts[1])[parts[0]] += value
        elif parts[0] in ("dropped", "dead_letter") and len(parts) == 3:
            stats[parts[0]][parts[2]] = stats[parts[0]].get(parts[2], 0) + value
            src(parts[1])[parts[0]][parts[2]] = value
        elif parts[0] == "lines_removed":
            stats["lines_removed"][parts[1]] = value
        elif parts[0] == "file" and len(parts) >= 3 and parts[1] in FILE_COUNTS:
            key = "/".join(parts[2:])  # KIND:NAME, where NAME may hold folders
            stats["files"].setdefault(key, {})[parts[1]] = value
        else:
            stats["other"][name] = value
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
    """How the counters and the files written (`written`: counts by key of the shards' summaries)
    disagree, and dumps whose index lists other pages than were read and lost."""
    kept_written = sum(v for k, v in written.items() if k.startswith("kept/"))
    rejected_written = sum(v for k, v in written.items() if not k.startswith("kept/"))
    problems = []
    if not stats["invariant"]["holds"]:
        problems.append(f"read {stats['read']} != accounted {stats['invariant']['accounted']}")
    if kept_written != stats["kept"]:
        problems.append(f"docs shards hold {kept_written} documents, counters say {stats['kept']}")
    if rejected_written != stats["dropped_total"] + stats["dead_letter_total"]:
        problems.append(f"rejected shards hold {rejected_written} records, counters say otherwise")
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


def check_outcome(stats: dict, out_dir: str, max_dead_letter_fraction: float) -> None:
    """StageFailed when the run must not be published: the sources yielded no record, too much went
    to the dead letter (the message names the commonest reason), or no document was kept."""
    read = stats["read"]
    if read == 0:
        raise StageFailed("the sources yielded no record (empty files?); no manifest written")
    check_dead_letters(
        stats["dead_letter"],
        read,
        max_dead_letter_fraction,
        "records",
        storage.join(out_dir, "rejected-*.jsonl.gz"),
        note=_lost_note(stats),
    )
    if stats["kept"] == 0:
        dropped = ", ".join(f"{r} {n}" for r, n in sorted(stats["dropped"].items(), key=lambda kv: -kv[1]))
        raise StageFailed(
            f"no document kept of {read} read (dropped: {dropped}); check the inputs or loosen the "
            f"filters (e.g. --min-chars, --min-cjk-ratio); no manifest written"
        )


def counts_from_summaries(summaries: list[dict]) -> dict[str, int]:
    total: dict[str, int] = {}
    for s in summaries:
        for k, v in s["counts"].items():
            total[k] = total.get(k, 0) + v
    return total

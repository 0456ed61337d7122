"""What the driver checks after a run, from the merged stats (stats.json) and the files on disk.

Unusable documents are skipped and written to the dead letter with their reason. `empty` (nothing left
after normalisation) is a legitimate skip; every other reason (malformed JSON or document, invalid
UTF-8, no gold words for --whole-word gold) means broken input or input that does not suit the options,
so it counts against --max-dead-letter-fraction: past it the stage fails instead of writing a manifest.
A file that cannot be read to its end (truncated or corrupt .gz/.bz2) fails the stage: the documents
it would have held cannot be counted, and instances must be built from all of their input or not at all.
"""

from __future__ import annotations

from core import storage
from core.errors import StageFailed
from pipelines.dead_letter_limit import check_dead_letter_limit
from pipelines.instance_builder import InstanceConfig

LEGITIMATE_SKIPS = ("empty",)  # skip reasons that are no dead letter (see the module docstring)


def summarize(stats: dict, config: InstanceConfig | None = None) -> dict:
    """Headline figures of a run, computed from the merged stats (per split and overall)."""
    kept = sum(stats.get(split, {}).get("documents", 0) for split in ("train", "eval"))
    skipped = sum(stats.get("skipped", {}).values())
    out = {
        "accounting": {
            "documents_read": stats.get("documents_read", 0),
            "documents_kept": kept,
            "documents_skipped": skipped,
            "balanced": stats.get("documents_read", 0) == kept + skipped,
        }
    }
    for split in ("train", "eval"):
        s = stats.get(split)
        if not s:
            continue
        inst, real, pos = s.get("instances", 0), s.get("real_tokens", 0), s.get("positions", 0)
        out[split] = {
            "documents": s.get("documents", 0),
            "instances": inst,
            "real_tokens": real,
            "fill_rate": round(real / pos, 4) if pos else 0.0,
            "masked_fraction": round(s.get("masked", 0) / real, 4) if real else 0.0,
            "masked_per_instance": round(s.get("masked", 0) / inst, 2) if inst else 0.0,
            "sop_swapped_fraction": round(s.get("sop_swapped", 0) / inst, 4) if inst else 0.0,
            "mask_kinds": {
                k: round(s.get(f"masked_as_{k}", 0) / max(1, s.get("masked", 0)), 4)
                for k in ("mask", "random", "kept")
            },
            "ngram_used": s.get("ngram_used"),
            "tokens_dropped_no_boundary": s.get("tokens_dropped_no_boundary", 0),
            "sentences_split_across_sequences": s.get("sentences_split_across_sequences", 0),
        }
    return out


def check_accounting(stats: dict, written: list[str]) -> None:
    """StageFailed unless every document read was kept or skipped, and the TFRecord files on disk are
    the ones the stats list (the counters and the files must tell the same story)."""
    acc = summarize(stats)["accounting"]
    problems = []
    if not acc["balanced"]:
        problems.append(
            f"documents read {acc['documents_read']} != kept {acc['documents_kept']} "
            f"+ skipped {acc['documents_skipped']}"
        )
    listed = {f["name"] for split in ("train", "eval") for f in stats.get(split, {}).get("files", [])}
    on_disk = {storage.basename(p) for p in written}
    if listed != on_disk:
        problems.append(f"{len(on_disk)} TFRecord files on disk, the stats list {len(listed)}")
    if problems:
        raise StageFailed("instance accounting failed, no manifest written: " + "; ".join(problems))


def dead_letters(stats: dict) -> dict[str, int]:
    """Skipped documents that are dead letters, by reason (every skip but LEGITIMATE_SKIPS)."""
    return {
        reason: count for reason, count in stats.get("skipped", {}).items() if reason not in LEGITIMATE_SKIPS
    }


def check_outcome(
    stats: dict, out_dir: str, max_dead_letter_fraction: float, source: str = "the input"
) -> None:
    """StageFailed when the run must not be published: an input file could not be read to its end,
    the input held no document, too much of it went to the dead letter, nothing was kept, or no
    training instance came out."""
    unreadable = stats.get("unreadable", [])
    if unreadable:
        more = f" (and {len(unreadable) - 1} more unreadable files)" if len(unreadable) > 1 else ""
        raise StageFailed(f"{unreadable[0]}{more}: fix or remove it; no manifest written")
    read = stats.get("documents_read", 0)
    if read == 0:
        raise StageFailed(f"{source} holds no document (nothing but blank lines); no manifest written")
    dead = dead_letters(stats)
    check_dead_letter_limit(
        dead,
        read,
        max_dead_letter_fraction,
        "documents",
        storage.join(out_dir, "skipped-*.jsonl.gz"),
    )
    skipped = sum(stats.get("skipped", {}).values())
    if skipped == read:
        raise StageFailed(
            f"all {read} documents of {source} were skipped as empty; nothing to build instances from"
        )
    if not stats.get("train", {}).get("instances"):
        raise StageFailed(
            f"no training instance came out of {read - skipped} documents of {source} "
            f"({stats.get('train', {}).get('documents', 0)} in the train split): "
            f"give more text, or lower --eval-fraction; no manifest written"
        )

"""The train-split label counts that `albert evaluate`'s baselines come from: bounded, and cached.

The trivial baselines (model/evaluate.py: most frequent train token, unigram loss, SOP majority) need
the count of every real MLM label and of each SOP label of the train split. They depend on the train
split and the vocabulary size only, never on the checkpoint evaluated, so:

- reading is bounded: at most `max_records` records (DEFAULT_RECORDS unless told), spread over the
  split's files: each file in turn gives an equal share of what is left to read (a short file's
  shortfall goes to the files after it), from its start. Deterministic; a smaller split is read whole.
- the counts are cached in a folder the caller names (`albert evaluate --baseline-cache DIR`; the
  flows pass `<storage root>/evals/baselines`, never the instances folder, which belongs to the
  instance stage), one small JSON file per (train split, vocabulary size, cap), keyed by the split's
  identity (InstanceFiles.content_id: the output hashes its manifest records, or the names and sizes
  of foreign files) and its file names. Every later evaluation of the same split, every candidate of
  every promotion, reads no train record.
- a cache file that does not parse, is not ours, or whose key or checksum does not match is never
  used: it is reported with a warning, the counts are read again and the file is replaced.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass

import numpy as np

from core import storage

log = logging.getLogger(__name__)

DEFAULT_RECORDS = 200_000  # millions of masked labels: ample for the frequencies the baselines use
KIND = "albert-baseline-counts"
_NAMES = ("masked_lm_ids", "masked_lm_weights", "next_sentence_labels")
_BATCH = 1024  # records parsed per call


@dataclass
class LabelCounts:
    """Counts of the real MLM labels (V,) and of the SOP labels (2,) over `records` train records."""

    tokens: np.ndarray
    sop: np.ndarray
    records: int

    def checksum(self) -> str:
        payload = json.dumps([self.tokens.tolist(), self.sop.tolist(), self.records])
        return hashlib.sha256(payload.encode()).hexdigest()


@dataclass
class Outcome:
    """The counts, and how they were had: what the evaluation report says about its baselines."""

    counts: LabelCounts
    records_read: int  # train records read this time: 0 when the cache answered
    cache: str  # "off" (no folder given), "hit", "written", "replaced" (an unusable file was there)
    cache_file: str | None

    def report(self, split_records: int | None, max_records: int) -> dict:
        return {
            "records": self.counts.records,
            "records_read": self.records_read,
            "split_records": split_records,
            "max_records": max_records,
            "spread": "an equal share of the records left from the start of each train file",
            "cache": self.cache,
            "cache_file": self.cache_file,
        }


def cache_key(data, vocab_size: int, max_records: int) -> dict:
    """What a cached count is valid for: the train split (its identity and files), V, the cap."""
    return {
        "split": data.content_id,
        "files": [storage.basename(p) for p in data.files],
        "vocab_size": vocab_size,
        "max_records": max_records,
    }


def cache_path(folder: str, key: dict) -> str:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]
    return storage.join(folder, f"baseline-counts-{digest}.json")


def count_labels(data, vocab_size: int, max_records: int, check_ids) -> LabelCounts:
    """Read at most `max_records` records of the split, spread over its files (module docstring), and
    count their labels. `check_ids(ids, vocab_size, source)` refuses ids outside the vocabulary."""
    from model.data import iter_records, parse_examples

    tokens = np.zeros(vocab_size, dtype=np.int64)
    sop = np.zeros(2, dtype=np.int64)
    read = 0

    def count(records: list[bytes]) -> None:
        arrays = parse_examples(records, data.lengths, _NAMES)
        ids, real = arrays["masked_lm_ids"], arrays["masked_lm_weights"] > 0
        check_ids(ids[real], vocab_size, data.source)
        tokens[:] += np.bincount(ids[real], minlength=vocab_size)[:vocab_size]
        sop[:] += np.bincount(arrays["next_sentence_labels"].reshape(-1), minlength=2)[:2]

    for k, path in enumerate(data.files):
        share = (max_records - read) // (len(data.files) - k)  # what is left, shared by the files left
        batch: list[bytes] = []
        taken = 0
        for record, _ in iter_records(path) if share else ():
            batch.append(record)
            taken += 1
            if len(batch) == _BATCH:
                count(batch)
                batch = []
            if taken == share:
                break
        if batch:
            count(batch)
        read += taken
    return LabelCounts(tokens, sop, read)


def _load(path: str, key: dict, vocab_size: int) -> LabelCounts | None:
    """The counts a cache file holds for `key`; None (with a warning) when it cannot be used."""
    try:
        data = storage.read_json(path)
        if not isinstance(data, dict) or data.get("kind") != KIND or data.get("key") != key:
            raise ValueError("not a baseline-count file for this split, vocabulary size and cap")
        counts = LabelCounts(
            np.asarray(data["tokens"], dtype=np.int64),
            np.asarray(data["sop"], dtype=np.int64),
            data["records"],
        )
        if (
            counts.tokens.shape != (vocab_size,)
            or counts.sop.shape != (2,)
            or data["checksum"] != counts.checksum()
        ):
            raise ValueError("its counts do not match their checksum")
        return counts
    except (ValueError, KeyError, TypeError) as err:  # not JSON, not UTF-8, fields missing or wrong
        log.warning("baseline cache %s is unusable (%s): reading the train split again", path, err)
        return None


def train_label_counts(data, vocab_size: int, max_records: int, cache_dir: str | None, check_ids) -> Outcome:
    """The label counts of the train split `data` (model.data.InstanceFiles), from the cache in
    `cache_dir` when it holds them, else read (count_labels) and cached there."""
    if cache_dir is None:
        counts = count_labels(data, vocab_size, max_records, check_ids)
        return Outcome(counts, counts.records, "off", None)
    key = cache_key(data, vocab_size, max_records)
    path = cache_path(cache_dir, key)
    found = storage.exists(path)
    if found and (counts := _load(path, key, vocab_size)) is not None:
        return Outcome(counts, 0, "hit", path)
    counts = count_labels(data, vocab_size, max_records, check_ids)
    record = {
        "kind": KIND,
        "version": 1,
        "key": key,
        "records": counts.records,
        "checksum": counts.checksum(),
        "sop": counts.sop.tolist(),
        "tokens": counts.tokens.tolist(),
    }
    storage.write_text(path, json.dumps(record) + "\n")  # whole or not at all: a temporary name, renamed
    return Outcome(counts, counts.records, "replaced" if found else "written", path)

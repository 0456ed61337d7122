"""model/baselines.py: the baselines' train label counts are read from a bounded sample spread over
the train files, and cached per (train split, vocabulary size, cap): a second evaluation of the same
split reads no train record; another split or V never takes the cache; a damaged cache is recomputed."""

from __future__ import annotations

import dataclasses
import json
import logging
import os

import numpy as np
import pytest

from flows.cli import main as albert
from model import baselines
from model.data import find_instances, iter_records
from model.evaluate import check_ids, label_counts

V = 8000  # larger than the test vocabulary: every id fits


@pytest.fixture(scope="module")
def model_checkpoint(tmp_path_factory, instances_dir):
    """A tiny untrained model with the instances' vocabulary."""
    from core.tokenizer import Tokenizer
    from model.albert import AlbertForPreTraining
    from model.config import AlbertConfig
    from model.convert import save_pretrained
    from tests.model.tiny import TINY_MODEL

    vocab = find_instances(instances_dir).vocab_model
    config = AlbertConfig(**{**TINY_MODEL, "vocab_size": Tokenizer.load(vocab).vocab_size})
    return str(save_pretrained(AlbertForPreTraining(config), tmp_path_factory.mktemp("ckpt"), vocab))


@pytest.fixture
def reads(monkeypatch):
    """Counts the train records model/baselines.py reads, per file."""
    counted: dict[str, int] = {}

    def counting(path, *args, **kwargs):
        for item in iter_records(path, *args, **kwargs):
            counted[os.path.basename(path)] = counted.get(os.path.basename(path), 0) + 1
            yield item

    monkeypatch.setattr("model.data.iter_records", counting)
    return counted


def test_the_sample_is_spread_over_every_train_file(instances_dir, reads):
    data = find_instances(instances_dir, "train")
    per_file = [sum(1 for _ in iter_records(p)) for p in data.files]
    reads.clear()
    assert len(per_file) == 3 and min(per_file) > 4
    cap = 3 * min(per_file) - 2
    counts = baselines.count_labels(data, V, cap, check_ids)
    assert counts.records == cap and sum(reads.values()) == cap  # not one record more is read
    assert all(reads.get(os.path.basename(p), 0) >= cap // 3 for p in data.files)
    # A cap above the split reads all of it: the counts of every record.
    everything = baselines.count_labels(data, V, 10**9, check_ids)
    tokens, sop = label_counts(data, V)
    assert everything.records == sum(per_file)
    assert np.array_equal(everything.tokens, tokens) and np.array_equal(everything.sop, sop)


def test_a_second_count_of_the_same_split_reads_no_record(instances_dir, tmp_path, reads):
    data = find_instances(instances_dir, "train")
    cache = str(tmp_path / "cache")
    first = baselines.train_label_counts(data, V, 50, cache, check_ids)
    assert first.cache == "written" and first.records_read == 50 and sum(reads.values()) > 0
    reads.clear()
    second = baselines.train_label_counts(data, V, 50, cache, check_ids)
    assert second.cache == "hit" and second.records_read == 0 and reads == {}
    assert np.array_equal(second.counts.tokens, first.counts.tokens)
    assert np.array_equal(second.counts.sop, first.counts.sop) and second.counts.records == 50


def test_a_cache_of_another_split_or_vocabulary_size_is_not_used(instances_dir, tmp_path):
    data = find_instances(instances_dir, "train")
    cache = str(tmp_path / "cache")
    baselines.train_label_counts(data, V, 50, cache, check_ids)
    rebuilt = dataclasses.replace(data, content_id="another build of the folder")
    for other, v, cap in ((rebuilt, V, 50), (data, V + 1, 50), (data, V, 40)):
        outcome = baselines.train_label_counts(other, v, cap, cache, check_ids)
        assert outcome.cache == "written" and outcome.records_read > 0
    assert len(os.listdir(cache)) == 4


@pytest.mark.parametrize("damage", ["garbage", "tampered", "other key"])
def test_a_damaged_cache_file_is_recomputed_with_a_warning(instances_dir, tmp_path, caplog, damage):
    data = find_instances(instances_dir, "train")
    cache = str(tmp_path / "cache")
    first = baselines.train_label_counts(data, V, 50, cache, check_ids)
    path = first.cache_file
    record = json.load(open(path))
    if damage == "garbage":
        open(path, "wb").write(b"\x00not json")
    elif damage == "tampered":  # parses, but a count was changed: the checksum says so
        record["tokens"][int(np.argmax(record["tokens"]))] += 1
        json.dump(record, open(path, "w"))
    else:  # a file holding the counts of another split under this name
        record["key"]["split"] = "something else"
        json.dump(record, open(path, "w"))
    with caplog.at_level(logging.WARNING, logger="model.baselines"):
        again = baselines.train_label_counts(data, V, 50, cache, check_ids)
    assert again.cache == "replaced" and again.records_read == 50
    assert np.array_equal(again.counts.tokens, first.counts.tokens)
    assert any("unusable" in r.message and path in r.message for r in caplog.records)
    assert baselines.train_label_counts(data, V, 50, cache, check_ids).cache == "hit"  # repaired


def test_evaluate_reports_where_its_baselines_come_from(tmp_path, instances_dir, model_checkpoint, capsys):
    cache = str(tmp_path / "baselines")
    args = ["evaluate", "--checkpoint", model_checkpoint, "--instances", instances_dir,
            "--baseline-records", "60", "--baseline-cache", cache, "--device", "cpu"]  # fmt: skip
    assert albert([*args, "--out", str(tmp_path / "a.json")]) == 0
    assert albert([*args, "--out", str(tmp_path / "b.json")]) == 0
    a, b = (json.load(open(tmp_path / n)) for n in ("a.json", "b.json"))
    assert a["baseline_counts"]["records"] == 60 and a["baseline_counts"]["records_read"] == 60
    assert a["baseline_counts"]["cache"] == "written" and a["baseline_counts"]["max_records"] == 60
    assert b["baseline_counts"]["records_read"] == 0 and b["baseline_counts"]["cache"] == "hit"
    assert a["baselines"] == b["baselines"]  # the same counts, the same baselines
    capsys.readouterr()
    assert albert([*args, "--baseline-records", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--baseline-records must be at least 1" in err

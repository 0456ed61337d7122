"""`albert evaluate`: metrics on the eval split, baselines measured on the same predictions, Wilson CIs."""

from __future__ import annotations

import glob
import json
import os

import numpy as np
import pytest
import torch

from flows.cli import main as albert
from model.data import find_instances, iter_records, parse_examples
from model.evaluate import evaluate_checkpoint, wilson


def test_wilson_interval_known_values():
    assert wilson(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert wilson(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert wilson(10, 10)[1] == pytest.approx(1.0) and wilson(0, 0) == (0.0, 0.0)


def split_labels(instances: str, split: str):
    data = find_instances(instances, split)
    ids, sop = [], []
    for path in glob.glob(os.path.join(instances, f"{split}-*.tfrecord")):
        recs = [r for r, _ in iter_records(path)]
        a = parse_examples(recs, data.lengths, ("masked_lm_ids", "masked_lm_weights", "next_sentence_labels"))
        ids.append(a["masked_lm_ids"][a["masked_lm_weights"] > 0])
        sop.append(a["next_sentence_labels"][:, 0])
    return np.concatenate(ids), np.concatenate(sop)


@pytest.fixture(scope="module")
def constant_checkpoint(tmp_path_factory, instances_dir):
    """A model that always predicts the most frequent train token and the majority train SOP label
    (huge output biases): its accuracies must equal the baselines exactly."""
    from core.tokenizer import Tokenizer
    from model.albert import AlbertForPreTraining
    from model.config import AlbertConfig
    from model.convert import save_pretrained
    from tests.model.tiny import TINY_MODEL

    vocab = os.path.join(find_instances(instances_dir).vocab_model)
    config = AlbertConfig(**{**TINY_MODEL, "vocab_size": Tokenizer.load(vocab).vocab_size})
    model = AlbertForPreTraining(config)
    ids, sop = split_labels(instances_dir, "train")
    with torch.no_grad():
        model.predictions.bias[np.bincount(ids).argmax()] = 1e4
        model.sop_classifier.classifier.bias[np.bincount(sop).argmax()] = 1e4
    return str(save_pretrained(model, tmp_path_factory.mktemp("ckpt"), vocab))


def test_report_and_baselines(constant_checkpoint, instances_dir):
    r = evaluate_checkpoint(constant_checkpoint, instances_dir, batch_size=16, log=lambda m: None)
    train_ids, train_sop = split_labels(instances_dir, "train")
    eval_ids, eval_sop = split_labels(instances_dir, "eval")
    top = int(np.bincount(train_ids).argmax())
    b = r["baselines"]
    base = b["masked_lm_most_frequent_train_token"]
    assert base["token_id"] == top and base["source"] == "train split labels"
    assert base["n"] == r["masked_lm"]["n"] == len(eval_ids)
    assert base["accuracy"] == pytest.approx(float((eval_ids == top).mean()))
    # The constant model IS that baseline: same predictions, same accuracy.
    assert r["masked_lm"]["accuracy"] == pytest.approx(base["accuracy"])
    assert r["masked_lm"]["ci95"] == pytest.approx(list(wilson(base["correct"], base["n"])))
    majority = b["sentence_order_majority_train_label"]
    assert majority["label"] == int(np.bincount(train_sop).argmax()) and majority["n"] == len(eval_sop)
    assert r["sentence_order"]["accuracy"] == pytest.approx(float((eval_sop == majority["label"]).mean()))
    assert b["sentence_order_chance"]["accuracy"] == 0.5
    oracle = b["masked_lm_most_frequent_eval_token_oracle"]
    assert oracle["accuracy"] == pytest.approx(np.bincount(eval_ids).max() / len(eval_ids))
    counts = np.bincount(train_ids, minlength=r_vocab(constant_checkpoint)) + 1
    unigram = -np.log(counts[eval_ids] / counts.sum()).mean()
    assert b["masked_lm_unigram_loss"] == pytest.approx(unigram, rel=1e-6)
    assert r["masked_lm"]["loss"] > 0 and r["sentence_order"]["loss"] >= 0


def r_vocab(checkpoint: str) -> int:
    return json.load(open(os.path.join(checkpoint, "config.json")))["vocab_size"]


def test_cli_writes_json(tmp_path, constant_checkpoint, instances_dir, capsys):
    out = str(tmp_path / "eval.json")
    code = albert(
        ["evaluate", "--checkpoint", constant_checkpoint, "--instances", instances_dir, "--out", out]
    )
    assert code == 0
    report = json.load(open(out))
    assert set(report) >= {"masked_lm", "sentence_order", "baselines"}
    printed = capsys.readouterr().out
    assert "MLM accuracy" in printed and "baseline most frequent train token" in printed
    code = albert(["evaluate", "--checkpoint", str(tmp_path / "nope"), "--instances", instances_dir])
    assert code == 2 and "checkpoint folder not found" in capsys.readouterr().err


def test_the_trainers_eval_is_the_checkpoint_on_the_first_eval_batches(
    tmp_path, instances_dir, model_config_file
):
    """Why training-summary's eval figures differ from the gate's (eval-metrics): the trainer's last
    eval is the final checkpoint on the first eval_batches batches of the eval split, and its record
    says how many sequences that is; the gate's evaluation covers the whole split."""
    from model.trainer import train
    from tests.model.train_fixtures import train_config

    out = str(tmp_path / "run")
    summary = train(
        train_config(instances_dir, out, model_config_file, steps=2, batch_size=4, eval_batches=2)
    )
    record = [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl"))][-1]
    assert record["kind"] == "eval" and record["sequences"] == 2 * 4
    quiet = dict(device="cpu", baseline_records=64, log=lambda m: None)
    first = evaluate_checkpoint(summary["checkpoint"], instances_dir, batch_size=4, max_batches=2, **quiet)
    assert first["sentence_order"]["n"] == 8 and first["masked_lm"]["n"] == record["predictions"]
    assert first["masked_lm"]["loss"] == pytest.approx(record["masked_lm_loss"], rel=1e-5)
    assert first["sentence_order"]["accuracy"] == pytest.approx(record["sentence_order_accuracy"])
    whole = evaluate_checkpoint(summary["checkpoint"], instances_dir, batch_size=64, **quiet)
    assert whole["sentence_order"]["n"] > 8
    assert whole["masked_lm"]["loss"] != pytest.approx(record["masked_lm_loss"], rel=1e-5)

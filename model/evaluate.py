"""Held-out MLM and SOP metrics of a checkpoint, next to trivial baselines on the same data.

    albert evaluate --checkpoint DIR --instances DIR [--out FILE.json] [--max-batches N]

Metrics on the eval split (the instance stage holds out whole documents by id hash):
- masked_lm_accuracy / masked_lm_loss: over real predictions (masked_lm_weights = 1), the model's
  argmax against the original token; loss = mean cross-entropy (docs/albert.md §3).
- sentence_order_accuracy / sentence_order_loss.

Baselines, measured on exactly the same eval predictions:
- MLM most-frequent token: always predict the token that is most frequent among the TRAIN split's
  masked-token labels (learnable from training data; no peeking at the eval labels). The eval split's
  own most frequent label (an oracle constant) is reported beside it. The unigram loss baseline is the
  cross-entropy of the train label distribution (add-one smoothed) on the eval labels.
- SOP: chance (50%), and always predicting the train split's majority label.
The train label counts come from at most --baseline-records train instances spread over the train
files, and are cached per train split in --baseline-cache when given (model/baselines.py); the report's
`baseline_counts` says how many records they come from and whether the cache answered.

Accuracies carry 95% Wilson score intervals. They treat predictions as independent trials; masked
tokens of one sequence are correlated, so the MLM interval is somewhat optimistic.

Before any work: the checkpoint is verified (model.convert.read_checkpoint), its spm.model must be the
vocabulary the instances were built with (model.data.check_vocab), and --out must be a file this
command may write (not a folder, not someone else's file unless --force, in a folder that takes files).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from core import config_cli, storage
from core.config_cli import opt
from core.errors import UserError
from model.baselines import DEFAULT_RECORDS, train_label_counts
from model.convert import SPM_NAME, parse_spm
from model.reports import check_report_out, write_report
from promotion.samples import Baselines, EvalSample
from promotion.stats import wilson


@dataclass
class EvaluateOptions:
    """`albert evaluate`'s options, defined once: the command line is generated from them, and the
    flows build one and call run_evaluate."""

    checkpoint: str = opt(help="checkpoint folder, or a run folder (its newest checkpoint)")
    instances: str = opt(help="instance folder with eval-*.tfrecord and train-*.tfrecord")
    out: str | None = opt(None, "JSON report (default: <checkpoint>/eval.json)")
    force: bool = opt(False, "replace an --out file that is not an evaluate report")
    batch_size: int = opt(64)
    max_batches: int | None = opt(None, "evaluate only this many batches")
    device: str = opt("auto", "auto (cuda if available, else cpu), cpu, cuda")
    baseline_records: int = opt(
        DEFAULT_RECORDS,
        "train instances read for the baselines, spread over the train files (model/baselines.py)",
    )
    baseline_cache: str | None = opt(
        None, "folder that caches the baselines' train label counts per train split (default: none)"
    )


def _acc(correct: float, n: float) -> dict:
    lo, hi = wilson(correct, n)
    return {
        "accuracy": correct / n if n else 0.0,
        "ci95": [lo, hi],
        "n": int(n),
        "correct": int(round(correct)),
    }


@torch.no_grad()
def eval_sums(
    model: torch.nn.Module,
    batches,
    device: torch.device,
    autocast=contextlib.nullcontext,
    max_batches: int | None = None,
    label_hook=None,
    per_sequence: dict[str, list] | None = None,
) -> dict[str, float]:
    """Sums over batches: mlm loss*weight, mlm weight, correct; sop loss*count, count, correct.

    `label_hook(batch)` is called with every CPU batch (baselines count labels there). `per_sequence`,
    when given, receives the same figures per sequence (lists of arrays under mlm_loss_sum, mlm_count,
    mlm_correct, sop_correct): what the promotion gate pairs between two models."""
    was_training = model.training
    model.eval()
    sums = torch.zeros(6, dtype=torch.float64)
    for i, item in enumerate(batches):
        if max_batches is not None and i >= max_batches:
            break
        batch = item[0] if isinstance(item, tuple) else item
        if label_hook is not None:
            label_hook(batch)
        batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
        with autocast():
            out = model(**batch)
        if per_sequence is not None:
            for k, v in sequence_figures(out, batch).items():
                per_sequence.setdefault(k, []).append(v)
        # Stacked on the device, read once (on XLA, one graph per batch, not one per figure)
        figures = (
            out.mlm_loss * out.mlm_weight,
            out.mlm_weight,
            out.mlm_correct,
            out.sop_loss * out.sop_count,
            out.sop_count,
            out.sop_correct,
        )
        sums += torch.stack([f.float() for f in figures]).cpu().double()
    model.train(was_training)
    keys = ("mlm_loss_sum", "mlm_weight", "mlm_correct", "sop_loss_sum", "sop_count", "sop_correct")
    return dict(zip(keys, sums.tolist()))


def sequence_figures(out, batch: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
    """Per sequence of a batch: MLM loss sum and count of real predictions, correct predictions, SOP
    right or wrong. (B,) numpy arrays."""
    ids = batch["masked_lm_ids"].long()  # (B, P)
    w = batch["masked_lm_weights"].float()  # (B, P)
    logits = out.mlm_logits.float()  # (B, P, V)
    ce = F.cross_entropy(logits.flatten(0, 1), ids.flatten(), reduction="none").view_as(w)
    labels = batch["sentence_order_label"].long().reshape(-1)
    return {
        "mlm_loss_sum": (ce * w).sum(1).double().cpu().numpy(),
        "mlm_count": w.sum(1).double().cpu().numpy(),
        "mlm_correct": ((logits.argmax(-1) == ids).float() * w).sum(1).double().cpu().numpy(),
        "sop_correct": (out.sop_logits.argmax(-1) == labels).cpu().numpy(),
    }


def summarize(s: dict[str, float]) -> dict[str, float]:
    """Means from eval_sums: the four reported metrics, and what they are means over (sequences, real
    MLM predictions), so that a figure can say which part of the split it comes from."""
    return {
        "masked_lm_loss": s["mlm_loss_sum"] / max(s["mlm_weight"], 1e-9),
        "masked_lm_accuracy": s["mlm_correct"] / max(s["mlm_weight"], 1e-9),
        "sentence_order_loss": s["sop_loss_sum"] / max(s["sop_count"], 1e-9),
        "sentence_order_accuracy": s["sop_correct"] / max(s["sop_count"], 1e-9),
        "sequences": int(round(s["sop_count"])),
        "predictions": int(round(s["mlm_weight"])),
    }


def check_ids(ids: np.ndarray, vocab_size: int, source: str) -> None:
    """Token ids past the model's vocabulary mean instances built with another vocabulary (the model
    would fail on an index error, bincount would drop them silently)."""
    if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= vocab_size):
        bad = int(ids.max()) if int(ids.max()) >= vocab_size else int(ids.min())
        raise UserError(
            f"{source} holds token id {bad}, outside the model's vocabulary of {vocab_size}: the "
            f"instances were built with another vocabulary than the checkpoint's"
        )


def label_counts(data, vocab_size: int, max_records: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(count of every token id among real MLM labels, count of each SOP label) over a split."""
    from model.data import InstanceStream

    names = ("masked_lm_ids", "masked_lm_weights", "next_sentence_labels")
    stream = InstanceStream(data, 1024, shuffle_window=0, epochs=1, names=names)
    tokens = np.zeros(vocab_size, dtype=np.int64)
    sop = np.zeros(2, dtype=np.int64)
    seen = 0
    for batch, _ in stream.batches():
        ids = batch["masked_lm_ids"].numpy()
        real = batch["masked_lm_weights"].numpy() > 0
        check_ids(ids[real], vocab_size, data.source)
        tokens += np.bincount(ids[real], minlength=vocab_size)[:vocab_size]
        sop += np.bincount(batch["sentence_order_label"].numpy(), minlength=2)[:2]
        seen += len(ids)
        if max_records is not None and seen >= max_records:
            break
    return tokens, sop


def evaluate_checkpoint(
    checkpoint: str,
    instances: str,
    batch_size: int = 64,
    max_batches: int | None = None,
    device: str = "auto",
    baseline_records: int = DEFAULT_RECORDS,
    baseline_cache: str | None = None,
    log=print,
) -> dict:
    """Everything `albert evaluate` reports, as a dict (see the module docstring)."""
    from model.convert import load_pretrained
    from model.data import InstanceStream, find_instances
    from model.device import resolve_device, to_device

    dev = resolve_device(device)
    eval_data = find_instances(instances, "eval")
    train_data = find_instances(instances, "train")
    model = to_device(load_pretrained(checkpoint, "AlbertForPreTraining"), dev)  # verified (checksums.json)
    check_checkpoint_vocab(checkpoint, eval_data)
    V = model.config.vocab_size
    if eval_data.max_seq_length > model.config.max_position_embeddings:
        raise UserError(
            f"instances have length {eval_data.max_seq_length}, the model covers {model.config.max_position_embeddings}"
        )
    started = time.time()
    had = train_label_counts(train_data, V, baseline_records, baseline_cache, check_ids)
    log(
        f"baseline label counts from {had.counts.records} of {train_data.num_records or '?'} train instances"
        + (f" (cache {had.cache}: {had.cache_file})" if had.cache_file else "")
    )
    train_tokens, train_sop = had.counts.tokens, had.counts.sop
    eval_tokens = np.zeros(V, dtype=np.int64)
    eval_sop = np.zeros(2, dtype=np.int64)
    top_train, majority = int(train_tokens.argmax()), int(train_sop.argmax())
    unigram = (train_tokens + 1) / (train_tokens.sum() + V)  # add-one smoothed train label frequencies
    baseline_rows: dict[str, list] = {}

    def hook(batch):
        ids = batch["masked_lm_ids"].numpy()
        w = batch["masked_lm_weights"].numpy()
        real = w > 0
        check_ids(batch["input_ids"].numpy(), V, eval_data.source)  # before the model indexes with them
        check_ids(ids[real], V, eval_data.source)
        eval_tokens[:] += np.bincount(ids[real], minlength=V)[:V]
        sop = batch["sentence_order_label"].numpy().reshape(-1)
        eval_sop[:] += np.bincount(sop, minlength=2)[:2]
        # The trivial baselines, per sequence, on exactly these predictions (paired with the model's).
        safe = np.where(real, ids, 0)
        for k, v in {
            "unigram_loss_sum": (-np.log(unigram[safe]) * w).sum(1),
            "most_frequent_correct": ((ids == top_train) * w).sum(1),
            "sop_majority_correct": sop == majority,
        }.items():
            baseline_rows.setdefault(k, []).append(v)

    stream = InstanceStream(eval_data, batch_size, shuffle_window=0, epochs=1)
    autocast = (
        (lambda: torch.autocast(dev.type, dtype=torch.bfloat16))
        if dev.type in ("cuda", "xla")
        else contextlib.nullcontext
    )
    log(f"evaluating {checkpoint} on {eval_data.num_records or '?'} eval instances")
    rows: dict[str, list] = {}
    sums = eval_sums(model, stream.batches(), dev, autocast, max_batches, hook, rows)
    summary = summarize(sums)
    n_mlm, n_sop = sums["mlm_weight"], sums["sop_count"]
    top_eval = int(eval_tokens.argmax())
    unigram_loss = float(-(eval_tokens * np.log(unigram)).sum() / max(eval_tokens.sum(), 1))
    cat = {k: np.concatenate(v) if v else np.zeros(0) for k, v in {**rows, **baseline_rows}.items()}
    samples = {
        "model": EvalSample(
            cat["mlm_loss_sum"], cat["mlm_count"], cat["mlm_correct"], cat["sop_correct"]
        ).to_json(),
        "baselines": Baselines(
            cat["unigram_loss_sum"],
            cat["mlm_count"],
            cat["most_frequent_correct"],
            cat["sop_majority_correct"],
        ).to_json(),
    }
    spm_path = storage.join(checkpoint, SPM_NAME)
    piece = None
    if storage.isfile(spm_path):
        piece = parse_spm(spm_path, storage.read_bytes(spm_path)).id_to_piece(top_train)
    return {
        "checkpoint": checkpoint,
        "instances": instances,
        "split": "eval",
        "seconds": round(time.time() - started, 1),
        "masked_lm": {**_acc(sums["mlm_correct"], n_mlm), "loss": summary["masked_lm_loss"]},
        "sentence_order": {**_acc(sums["sop_correct"], n_sop), "loss": summary["sentence_order_loss"]},
        "baselines": {
            "masked_lm_most_frequent_train_token": {
                **_acc(float(eval_tokens[top_train]), n_mlm),
                "token_id": top_train,
                "piece": piece,
                "source": "train split labels",
            },
            "masked_lm_most_frequent_eval_token_oracle": {
                **_acc(float(eval_tokens[top_eval]), n_mlm),
                "token_id": top_eval,
                "source": "eval split labels (an oracle constant, for reference)",
            },
            "masked_lm_unigram_loss": unigram_loss,
            "sentence_order_chance": {"accuracy": 0.5, "loss": math.log(2)},
            "sentence_order_majority_train_label": {
                **_acc(float(eval_sop[majority]), n_sop),
                "label": majority,
                "source": "train split labels",
            },
        },
        "baseline_counts": had.report(train_data.num_records, baseline_records),
        "note": "95% Wilson intervals; MLM predictions of one sequence are not independent",
        "per_sequence": samples,
    }


def check_checkpoint_vocab(checkpoint: str, data) -> None:
    """The checkpoint's spm.model must be the vocabulary the instances were built with (their manifest
    records its sha256; foreign TFRecords record none)."""
    from model.data import check_vocab

    spm_path = storage.join(checkpoint, SPM_NAME)
    if storage.isfile(spm_path):
        check_vocab(data, spm_path, f"the checkpoint's {SPM_NAME}")
    elif data.vocab_sha256 is not None:
        raise UserError(
            f"{checkpoint} has no {SPM_NAME}, so its vocabulary cannot be checked against {data.source}; "
            f"copy the vocabulary it was trained with into it as {SPM_NAME} (albert import --spm-model)"
        )


def format_report(report: dict) -> str:
    def pct(result):
        lo, hi = result["ci95"]
        return f"{result['accuracy']:.2%} [{lo:.2%}, {hi:.2%}]"

    baselines = report["baselines"]
    return "\n".join(
        [
            f"MLM accuracy {pct(report['masked_lm'])} (n={report['masked_lm']['n']:,}), loss {report['masked_lm']['loss']:.3f}",
            f"  baseline most frequent train token {baselines['masked_lm_most_frequent_train_token']['piece']!r}: "
            f"{pct(baselines['masked_lm_most_frequent_train_token'])}; unigram loss {baselines['masked_lm_unigram_loss']:.3f}",
            f"SOP accuracy {pct(report['sentence_order'])} (n={report['sentence_order']['n']:,}), loss {report['sentence_order']['loss']:.3f}",
            f"  baselines: chance 50.00%, majority train label: {pct(baselines['sentence_order_majority_train_label'])}",
        ]
    )


def add_arguments(p: argparse.ArgumentParser) -> None:
    config_cli.add_arguments(p, EvaluateOptions)


def run(args: argparse.Namespace) -> int:
    run_evaluate(config_cli.from_args(EvaluateOptions, args))
    return 0


def run_evaluate(opts: EvaluateOptions) -> dict:
    """`albert evaluate`: check where the reports go (before any work), evaluate, write the report and
    its per-sequence file, print the summary. Returns the report as written to --out."""
    from model.checkpoint import resolve

    if opts.baseline_records < 1:
        raise UserError(f"--baseline-records must be at least 1, got {opts.baseline_records}")
    if opts.baseline_cache is not None:
        storage.check_writable_folder(opts.baseline_cache, "--baseline-cache")
    checkpoint = resolve(opts.checkpoint)
    out = opts.out or storage.join(checkpoint, "eval.json")
    per_sequence = per_sequence_path(out)
    read = [("the checkpoint folder", checkpoint), ("the input --instances", opts.instances)]
    check_report_out(out, "evaluate", _is_eval_report, opts.force, read)
    check_report_out(per_sequence, "evaluate", _is_per_sequence, opts.force, read)
    report = evaluate_checkpoint(
        checkpoint,
        opts.instances,
        batch_size=opts.batch_size,
        max_batches=opts.max_batches,
        device=opts.device,
        baseline_records=opts.baseline_records,
        baseline_cache=opts.baseline_cache,
        log=lambda msg: print(msg, file=sys.stderr),
    )
    write_report(per_sequence, report.pop("per_sequence"), indent=None)
    report = {**report, "per_sequence_file": per_sequence}
    write_report(out, report)
    print(format_report(report))
    print(f"wrote {out} and {storage.basename(per_sequence)}")
    return report


def per_sequence_path(report_path: str) -> str:
    """Where the per-sequence figures of a report go: eval.json -> eval.per-sequence.json."""
    stem = report_path[: -len(".json")] if report_path.endswith(".json") else report_path
    return stem + ".per-sequence.json"


def _is_eval_report(data: dict) -> bool:
    return {"checkpoint", "masked_lm", "sentence_order"} <= set(data)


def _is_per_sequence(data: dict) -> bool:
    return {"model", "baselines"} <= set(data)

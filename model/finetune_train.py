"""Fine-tuning a classifier: the training loop with dev-based early stopping, prediction, and the
metrics of a report.

Training: AdamW (weight decay 0.01, not on LayerNorm/bias), linear warmup (10%) then linear decay,
evaluation on dev every `eval_every` steps, early stopping after `patience` evaluations without a
better dev score; the best dev state is evaluated on test. The loop serves every task kind: it takes
the batch collate and the dev score (`DevScore`): dev accuracy for sentence classification (the
default), dev entity F1 for NER (model/ner_finetune.py). Metrics of classification: accuracy (95%
Wilson interval), F1 of the positive class (label index 1) for two classes, macro F1.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from core.config_cli import opt
from core.errors import UserError
from model.device import to_device
from model.finetune_data import collate
from model.text_baselines import float_list
from model.tpu import graph_cut, length_multiple
from promotion.stats import wilson


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


SEEDS_ON_GPU = 5
SEEDS_ON_CPU = 2
"""--seeds 0 (the default): fine-tuning seeds per neural model on a GPU and elsewhere. Two seeds are
the fewest that measure the spread between seeds at all; a GPU affords five."""


@dataclass
class FinetuneConfig:
    """Training hyper-parameters (the training section of `albert finetune`'s options; the report
    records them under "config"). Fields without opt() are fixed: they have no flag."""

    max_seq_length: int = opt(128)
    batch_size: int = opt(32)
    epochs: float = opt(3.0)
    lr: float = opt(2e-4)
    weight_decay: float = 0.01
    warmup_fraction: float = 0.1
    eval_every: int = opt(50)
    """Steps between dev evaluations (early stopping granularity)."""
    patience: int = opt(4)
    """Evaluations without a better dev score before stopping. They are not counted while the best
    dev score is still 0 (an NER model that has found no entity yet is warming up, not stuck)."""
    seed: int = opt(12345)
    device: str = opt("auto")
    scratch_lrs: tuple[float, ...] = opt(
        (5e-4, 1e-4),
        "from-scratch model: peak learning rates to try, chosen on dev with --scratch-warmups (comma-separated; "
        "the pretrained model's --lr and warm-up are always tried too). A GPU can afford a wider grid, "
        "e.g. --scratch-lrs 3e-3,1e-3,5e-4,2e-4,1e-4 --scratch-warmups 0,0.1,0.3",
        parse=float_list,
    )
    scratch_warmups: tuple[float, ...] = opt(
        (0.1,),
        "from-scratch model: warm-up fractions of the steps to try (comma-separated)",
        parse=float_list,
    )
    seeds: int = opt(
        0,
        "fine-tuning seeds per neural model (--seed, --seed+1, ...), each metric reported as the mean over "
        f"them with an interval over seeds and examples (0 = {SEEDS_ON_GPU} on a GPU, {SEEDS_ON_CPU} on a CPU)",
    )

    def __post_init__(self):
        if self.seeds < 0:
            raise UserError(f"--seeds must be >= 0, got {self.seeds}")


@torch.no_grad()
def predict(model, data, batch_size: int, device) -> np.ndarray:
    model.eval()
    preds = []
    order = np.argsort([len(x[0]) for x in data], kind="stable")  # similar lengths: less padding
    multiple = length_multiple(device)  # XLA: a few lengths, each compiled once
    for i in range(0, len(data), batch_size):
        batch = collate([data[j] for j in order[i : i + batch_size]], multiple)
        batch.pop("labels")
        logits = model(**{k: v.to(device) for k, v in batch.items()}).logits
        preds.append(logits.argmax(-1).cpu().numpy())
    out = np.empty(len(data), dtype=np.int64)
    out[order] = np.concatenate(preds) if preds else []
    return out


@dataclass(frozen=True)
class DevScore:
    """What early stopping maximises: `score(model)` -> a dict of dev metrics holding `metric`
    (recorded as `dev_<metric>` in the history; the best dict is the history's best_dev)."""

    metric: str
    score: Callable[[torch.nn.Module], dict]


def dev_accuracy(dev, num_labels: int, batch_size: int, device) -> DevScore:
    """Classification: accuracy (and the other `metrics`) of the labels predicted for `dev`."""
    gold = np.array([y for _, _, y in dev])
    return DevScore(
        "accuracy", lambda model: metrics(predict(model, dev, batch_size, device), gold, num_labels)
    )


def grouped_by_length(lengths: np.ndarray, batch_size: int, pool: int = 50) -> Callable:
    """An epoch order (for train_classifier's `epoch_order`) whose batches hold items of similar
    length, so that padding costs little: a random permutation, sorted by length within pools of
    `pool` batches, then its batches shuffled. Seeded by the loop's generator like the default."""
    lengths = np.asarray(lengths)

    def epoch_order(rng: np.random.Generator) -> np.ndarray:
        order = rng.permutation(len(lengths))
        pools = np.split(order, range(pool * batch_size, len(order), pool * batch_size))
        order = np.concatenate([p[np.argsort(lengths[p], kind="stable")] for p in pools])
        batches = np.split(order, range(batch_size, len(order), batch_size))
        return np.concatenate([batches[i] for i in rng.permutation(len(batches))])

    return epoch_order


def new_classifier(model_class, config, num_labels: int, seed: int, state: dict | None, checkpoint: str):
    """A fresh `model_class` (model/classifiers.py): the same head init and dropout stream for every
    model (seeded); the pretrained backbone loaded when `state` is given (read from `checkpoint`)."""
    from model.convert import load_state

    torch.manual_seed(seed)
    model = model_class(config, num_labels=num_labels)
    if state is not None:
        load_state(model, state, source=checkpoint)  # the backbone; the new head stays at its init
    return model


def train_classifier(
    model,
    train,
    dev,
    cfg: FinetuneConfig,
    num_labels: int,
    device,
    log=print,
    *,
    collate: Callable[[list], dict[str, torch.Tensor]] = collate,
    dev_score: DevScore | None = None,
    epoch_order: Callable[[np.random.Generator], np.ndarray] | None = None,
) -> dict:
    """Fine-tune `model` in place on `train` (batches made by `collate`, in the order of each epoch
    `epoch_order` gives, by default a random permutation); returns the best-dev history. The dev
    score is `dev_score`, by default the accuracy on `dev` (classification items). The best state is
    loaded at the end."""
    from model.optim import Schedule, build_optimizer

    to_device(model, device)  # tied weights kept tied (XLA)
    # XLA: batches padded to a few lengths (each step shape compiles once), the step's graph cut after
    # the update (nothing is read on the host inside it); no-ops elsewhere (model/tpu.py).
    multiple, cut_graph = length_multiple(device), graph_cut(torch.device(device))
    optimizer = build_optimizer(model, "adamw", cfg.lr, cfg.weight_decay, eps=1e-6)
    steps_per_epoch = math.ceil(len(train) / cfg.batch_size)
    total = max(1, int(round(cfg.epochs * steps_per_epoch)))
    schedule = Schedule(cfg.lr, int(cfg.warmup_fraction * total), total)
    rng = np.random.default_rng(cfg.seed)
    dev_score = dev_score or dev_accuracy(dev, num_labels, 2 * cfg.batch_size, device)
    metric = dev_score.metric
    best = {metric: -1.0}
    best_state, history, since_best, step = None, [], 0, 0
    started = time.time()
    order = np.array([], dtype=np.int64)
    while step < total and since_best < cfg.patience:
        if not len(order):
            order = epoch_order(rng) if epoch_order else rng.permutation(len(train))
        idx, order = order[: cfg.batch_size], order[cfg.batch_size :]
        batch = {k: v.to(device) for k, v in collate([train[i] for i in idx], multiple).items()}
        model.train()
        schedule.apply(optimizer, step)
        loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        cut_graph()
        step += 1
        if step % cfg.eval_every == 0 or step == total:
            dev_metrics = dev_score.score(model)
            history.append({"step": step, "loss": float(loss.detach()), f"dev_{metric}": dev_metrics[metric]})
            if dev_metrics[metric] > best[metric]:
                best, since_best = {**dev_metrics, "step": step}, 0
                best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
            elif best[metric] > 0:  # a model that has scored nothing yet is still warming up
                since_best += 1
            log(
                f"  step {step}/{total} loss {float(loss.detach()):.4f} dev {metric} {dev_metrics[metric]:.4f} (best {best[metric]:.4f})"
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

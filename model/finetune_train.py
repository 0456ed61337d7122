"""Fine-tuning a classifier: the training loop with dev-based early stopping, prediction, and the
metrics of a report.

Training: AdamW (weight decay 0.01, not on LayerNorm/bias), linear warm-up (the run's fraction of its
planned steps) then linear decay, evaluation on dev once per epoch (or every `eval_every` steps),
early stopping after `patience` evaluations without a better dev score; the best dev state is
evaluated on test. The loop serves every task kind: it takes
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
from model.finetune_progress import FinetuneProgress
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
    records them under "config"). Fields without opt() have no flag: `lr` and `warmup_fraction` are
    the setting of one run, which the search (--lrs x --warmups) sets."""

    max_seq_length: int = opt(128)
    batch_size: int = opt(16)
    epochs: float = opt(
        10.0, "the most epochs of a run; early stopping on dev (--patience) usually ends it sooner"
    )
    lrs: tuple[float, ...] = opt(
        (2e-4, 1e-3),
        "peak learning rates searched, chosen on dev with --warmups on the first seed, for every "
        "neural model alike (pretrained and from scratch; comma-separated). A GPU affords a wider grid, "
        "e.g. --lrs 5e-5,1e-4,2e-4,5e-4,1e-3 --warmups 0.06,0.1,0.3",
        parse=float_list,
    )
    warmups: tuple[float, ...] = opt(
        (0.1,),
        "warm-up fractions of a run's planned steps searched with --lrs (comma-separated)",
        parse=float_list,
    )
    lr: float = 2e-4
    warmup_fraction: float = 0.1
    weight_decay: float = 0.01
    eval_every: int = opt(0, "steps between dev evaluations (0 = once per epoch)")
    patience: int = opt(3)
    """Evaluations without a better dev score before stopping. They are not counted while the best
    dev score is still 0 (an NER model that has found no entity yet is warming up, not stuck)."""
    seed: int = opt(12345)
    device: str = opt("auto")
    seeds: int = opt(
        0,
        "fine-tuning seeds per neural model (--seed, --seed+1, ...), each metric reported as the mean over "
        f"them with an interval over seeds and examples (0 = {SEEDS_ON_GPU} on a GPU, {SEEDS_ON_CPU} on a CPU)",
    )

    def __post_init__(self):
        if self.seeds < 0:
            raise UserError(f"--seeds must be >= 0, got {self.seeds}")
        if self.batch_size < 1 or self.max_seq_length < 8 or self.epochs <= 0 or self.patience < 1:
            raise UserError(
                "fine-tuning needs --batch-size >= 1, --max-seq-length >= 8, --epochs > 0 and --patience >= 1"
            )
        if self.eval_every < 0:
            raise UserError(f"--eval-every must be >= 0, got {self.eval_every}")
        bad = [x for x in self.lrs if not 0 <= x < 1] + [x for x in self.warmups if not 0 <= x < 1]
        if bad or not self.lrs or not self.warmups:
            raise UserError("--lrs and --warmups take numbers in [0, 1), at least one each")

    def grid(self) -> list[tuple[float, float]]:
        """The settings every neural model searches, in order: (learning rate, warm-up fraction).
        The same list for the pretrained and the from-scratch model: that is what makes them comparable."""
        return [(lr, warmup) for lr in self.lrs for warmup in self.warmups]

    def planned_steps(self, train_items: int) -> int:
        """Steps of a run on `train_items` items: epochs x batches per epoch (early stopping may end it
        sooner)."""
        return max(1, int(round(self.epochs * math.ceil(train_items / self.batch_size))))

    def eval_interval(self, train_items: int) -> int:
        """Steps between dev evaluations: --eval-every, or the batches of one epoch."""
        return self.eval_every or max(1, math.ceil(train_items / self.batch_size))


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
    (recorded as `dev_<metric>` in the history; the best dict is the history's best_dev). `floor`:
    the score of a model that has learnt nothing, one label for every input (classification: the
    dev share of its most frequent label; NER: 0, no entity found). Patience counts only once the
    best score is above it: a run still on that plateau is warming up, not done (runs at 1e-4 and
    1e-3 on 400 reviews were stopped there after 3 epochs at the majority rate)."""

    metric: str
    score: Callable[[torch.nn.Module], dict]
    floor: float = 0.0


def dev_accuracy(dev, num_labels: int, batch_size: int, device) -> DevScore:
    """Classification: accuracy (and the other `metrics`) of the labels predicted for `dev`."""
    gold = np.array([y for _, _, y in dev])
    majority = float(np.bincount(gold, minlength=num_labels).max() / len(gold)) if len(gold) else 0.0
    return DevScore(
        "accuracy",
        lambda model: metrics(predict(model, dev, batch_size, device), gold, num_labels),
        floor=majority,
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


def finetune_optimizer(model, cfg: FinetuneConfig) -> torch.optim.Optimizer:
    """AdamW (model.optim.build_optimizer: no weight decay on LayerNorm/bias). Parameters the model
    names in `lr_scales()` (a CRF layer's transitions) get a group of their own, without weight decay,
    whose rate the schedule multiplies by their scale."""
    from model.optim import build_optimizer

    optimizer = build_optimizer(model, "adamw", cfg.lr, cfg.weight_decay, eps=1e-6)
    scales = model.lr_scales() if hasattr(model, "lr_scales") else {}
    named = dict(model.named_parameters())
    for name, scale in scales.items():
        parameter = named[name]
        for group in optimizer.param_groups:
            group["params"] = [p for p in group["params"] if p is not parameter]
        optimizer.add_param_group({"params": [parameter], "weight_decay": 0.0, "lr_scale": scale})
    return optimizer


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
    progress: FinetuneProgress | None = None,
) -> dict:
    """Fine-tune `model` in place on `train` (batches made by `collate`, in the order of each epoch
    `epoch_order` gives, by default a random permutation); returns the best-dev history. The dev
    score is `dev_score`, by default the accuracy on `dev` (classification items). The best state is
    loaded at the end. `progress`: the command's progress, which each evaluation's line goes through
    (with the run's place among the command's runs, the elapsed time and the ETA); else `log`."""
    from model.optim import Schedule

    to_device(model, device)  # tied weights kept tied (XLA)
    # XLA: batches padded to a few lengths (each step shape compiles once), the step's graph cut after
    # the update (nothing is read on the host inside it); no-ops elsewhere (model/tpu.py).
    multiple, cut_graph = length_multiple(device), graph_cut(torch.device(device))
    optimizer = finetune_optimizer(model, cfg)
    total, eval_every = cfg.planned_steps(len(train)), cfg.eval_interval(len(train))
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
        if progress is not None:
            progress.update(step)
        if step % eval_every == 0 or step == total:
            dev_metrics = dev_score.score(model)
            history.append({"step": step, "loss": float(loss.detach()), f"dev_{metric}": dev_metrics[metric]})
            if dev_metrics[metric] > best[metric]:
                best, since_best = {**dev_metrics, "step": step}, 0
                best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
            elif best[metric] > dev_score.floor:  # on the plateau of a constant model: still warming up
                since_best += 1
            line = (
                f"step {step}/{total} loss {float(loss.detach()):.4f} dev {metric} "
                f"{dev_metrics[metric]:.4f} (best {best[metric]:.4f})"
            )
            if progress is not None:
                progress.line(line)
            else:
                log(f"  {line}")
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

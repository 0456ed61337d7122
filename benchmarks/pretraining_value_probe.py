"""The frozen-feature probe of `albert bench pretraining-value`: what a checkpoint's encoder knows about
a classification task before fine-tuning moves it.

Fine-tuning rewrites every weight, so a lift over scratch mixes what pretraining put in the encoder
with how the two models react to the same 400 labels. The probe keeps the encoder fixed: each review
becomes the mean of its last-layer vectors over its real tokens (padding and nothing else left out),
and a logistic regression on those features is fitted on the train split, its L2 weight chosen on
dev, scored on test. The same network from its random initialisation (the scratch model's start, the
same seed) is probed the same way; the paired difference on the test examples, with a bootstrap
interval over them, is what pretraining put into the features.

    probe_unit(task, model, pretrained, seed) -> {"dev", "test", "l2", "correct": [0/1 per test example]}
"""

from __future__ import annotations

import numpy as np
import torch

L2_GRID = (1e-3, 1e-2, 1e-1, 1.0)  # on standardised features: from almost none to strong


@torch.no_grad()
def mean_features(model, items: list, batch_size: int = 32) -> np.ndarray:
    """(N, H): each item's last-layer vectors averaged over its real tokens; items as
    model.finetune_data.Encoder.encode gives them (ids, token types, label)."""
    model.eval()
    out = []
    for i in range(0, len(items), batch_size):
        chunk = items[i : i + batch_size]
        length = max(len(ids) for ids, _, _ in chunk)
        ids = torch.zeros(len(chunk), length, dtype=torch.long)  # (B, L), 0-padded
        types = torch.zeros_like(ids)
        mask = torch.zeros(len(chunk), length)  # (B, L), 1 = real token
        for row, (item_ids, item_types, _) in enumerate(chunk):
            ids[row, : len(item_ids)] = torch.from_numpy(item_ids)
            types[row, : len(item_types)] = torch.from_numpy(item_types)
            mask[row, : len(item_ids)] = 1
        seq = model.albert(ids, attention_mask=mask, token_type_ids=types).sequence_output  # (B, L, H)
        out.append(((seq * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)).numpy())
    return np.concatenate(out).astype(np.float64)


def fit_probe(x: np.ndarray, y: np.ndarray, classes: int, l2: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Multinomial logistic regression, mean cross-entropy + (l2/2)|W|^2, by full-batch L-BFGS from
    zero weights (deterministic)."""
    from model.text_baselines import minimize_lbfgs

    features, labels = torch.from_numpy(x), torch.from_numpy(y)
    weight = torch.zeros(x.shape[1], classes, dtype=torch.float64, requires_grad=True)
    bias = torch.zeros(classes, dtype=torch.float64, requires_grad=True)

    def closure():
        weight.grad = bias.grad = None
        loss = torch.nn.functional.cross_entropy(features @ weight + bias, labels)
        loss = loss + 0.5 * l2 * (weight**2).sum()
        loss.backward()
        return loss

    minimize_lbfgs([weight, bias], closure, max_iter=300)
    return weight.detach(), bias.detach()


def right(probe: tuple[torch.Tensor, torch.Tensor], x: np.ndarray, y: np.ndarray) -> np.ndarray:
    weight, bias = probe
    return ((torch.from_numpy(x) @ weight + bias).argmax(-1).numpy() == y).astype(np.int64)


def probe_unit(task, model, pretrained: bool, seed: int) -> dict:
    """The probe (module docstring) of `model` (model.finetune.PretrainedModel) on a
    model.finetune_tasks.ClassificationTask: its checkpoint's encoder, or with pretrained=False the
    same network at its random initialisation."""
    network = task.new_model(model.config, seed, model.state if pretrained else None, model.checkpoint)
    features = {split: mean_features(network, items) for split, items in task.data.items()}
    mean, sd = features["train"].mean(0), features["train"].std(0) + 1e-6  # standardised on train
    features = {split: (x - mean) / sd for split, x in features.items()}
    classes = len(task.labels)
    fitted = [fit_probe(features["train"], task.gold["train"], classes, l2) for l2 in L2_GRID]
    dev = [float(right(p, features["dev"], task.gold["dev"]).mean()) for p in fitted]
    best = int(np.argmax(dev))  # a tie keeps the smaller L2
    correct = right(fitted[best], features["test"], task.gold["test"])
    return {"dev": dev[best], "test": float(correct.mean()), "l2": L2_GRID[best], "correct": correct.tolist()}


def paired_interval(a: list[int], b: list[int], replicates: int = 4000, seed: int = 0) -> dict:
    """a - b on the same test examples (0/1 each): the difference and its bootstrap 95% interval."""
    diff = np.asarray(a, np.float64) - np.asarray(b, np.float64)
    rng = np.random.default_rng(seed)
    means = diff[rng.integers(0, len(diff), size=(replicates, len(diff)))].mean(1)
    low, high = np.percentile(means, [2.5, 97.5])
    return {"value": float(diff.mean()), "ci95": [float(low), float(high)]}

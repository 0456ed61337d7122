"""Fine-tuning a token classifier on the People's Daily NER task (model/ner_data.py): one model, one
seed, end to end, with the loop of model/finetune_train.py (early stopping on dev entity F1) and the
items of model/ner_encoding.py. The orchestration (seeds, the scratch grid, baselines, the report)
is model/finetune.py's; it calls:

    encoder = NerEncoder(spm_path, cfg.max_seq_length)
    items = {split: encoder.encode(examples[split]) for split in examples}
    model = token_classifier(config, len(BIO_TAGS), cfg.seed, state, checkpoint, head)  # state None: scratch
    history, tags, scores = train_ner_model(model, items, examples, cfg, device, log)

`scores[split]` are the per-example entity counts of model.ner_data.entity_counts
({"true_positives", "false_positives", "false_negatives"}, int arrays in the examples' order);
`history["best_dev"]` holds the dev entity_scores of the state kept.
"""

from __future__ import annotations

import numpy as np
import torch

from model.finetune_train import DevScore, FinetuneConfig, grouped_by_length, new_classifier, train_classifier
from model.ner_data import BIO_TAGS, NerExample, entity_counts, entity_scores
from model.ner_encoding import NerEncoder, TokenItem, collate_tokens, tags_from_units
from model.tpu import length_multiple

__all__ = ["NER_HEADS", "NerEncoder", "token_classifier", "predict_tags", "train_ner_model"]


NER_HEADS = ("linear", "crf")
"""The output layers of `--ner-head`: a label per unit from the linear layer alone, or a linear-chain
CRF over the units of each window (model.classifiers.AlbertForTokenClassificationCrf)."""


def token_classifier(
    config, num_labels: int, seed: int, state: dict | None, checkpoint: str, head: str = "linear"
):
    """A fresh token classifier with the `head` output layer (NER_HEADS): seeded head init; the
    pretrained backbone when `state`."""
    from model.classifiers import AlbertForTokenClassification, AlbertForTokenClassificationCrf

    classes = {"linear": AlbertForTokenClassification, "crf": AlbertForTokenClassificationCrf}
    return new_classifier(classes[head], config, num_labels, seed, state, checkpoint)


@torch.no_grad()
def predict_units(model, items: list[TokenItem], batch_size: int, device) -> list[np.ndarray]:
    """The label predicted for each unit of each item (BIO_TAGS indexes), in the items' order."""
    model.eval()
    out: list[np.ndarray] = [np.empty(0, np.int64)] * len(items)
    order = np.argsort([len(item.input_ids) for item in items], kind="stable")  # less padding
    multiple = length_multiple(device)  # XLA: a few lengths, each compiled once
    for i in range(0, len(items), batch_size):
        rows = order[i : i + batch_size]
        batch = collate_tokens([items[j] for j in rows], multiple)
        batch.pop("labels")
        logits = model(**{k: v.to(device) for k, v in batch.items()}).logits  # (B, L, num_labels)
        units = torch.zeros(logits.shape[:2], dtype=torch.bool)  # (B, L): each unit's first piece
        for row, j in enumerate(rows):
            units[row, items[j].unit_positions] = True
        predicted = model.unit_labels(logits, units.to(logits.device)).cpu().numpy()  # (units,) row by row
        counts = [len(items[j].unit_positions) for j in rows]
        for j, labels in zip(rows, np.split(predicted, np.cumsum(counts)[:-1])):
            out[j] = labels
    return out


def predict_tags(
    model, items: list[TokenItem], examples: list[NerExample], batch_size: int, device
) -> list[list[str]]:
    """One BIO tag per character of every example (its windows' predictions merged), in order."""
    return tags_from_units(items, predict_units(model, items, batch_size, device), examples)


def dev_entity_f1(items: list[TokenItem], examples: list[NerExample], batch_size: int, device) -> DevScore:
    """Early stopping on the dev examples' entity F1 (best_dev: their entity_scores)."""
    gold = [example.tags for example in examples]

    def score(model) -> dict:
        return entity_scores(entity_counts(gold, predict_tags(model, items, examples, batch_size, device)))

    return DevScore("entity_f1", score)


def train_ner_model(
    model,
    items: dict[str, list[TokenItem]],
    examples: dict[str, list[NerExample]],
    cfg: FinetuneConfig,
    device,
    log=print,
    progress=None,
) -> tuple[dict, dict[str, list[list[str]]], dict[str, dict[str, np.ndarray]]]:
    """Fine-tune a token classifier (token_classifier; seed cfg.seed) in place on items["train"],
    early stopping on dev entity F1; predict every split of `items`. Returns (training history, BIO
    tags per split, per-example entity counts per split)."""
    batch_size = 2 * cfg.batch_size
    dev_score = dev_entity_f1(items["dev"], examples["dev"], batch_size, device)
    # Batches of windows of similar length: random ones pad to their longest (most to over 213 of L 256).
    epoch_order = grouped_by_length([len(item.input_ids) for item in items["train"]], cfg.batch_size)
    history = train_classifier(
        model, items["train"], items["dev"], cfg, len(BIO_TAGS), device, log,
        collate=collate_tokens, dev_score=dev_score, epoch_order=epoch_order, progress=progress,
    )  # fmt: skip
    tags = {split: predict_tags(model, items[split], examples[split], batch_size, device) for split in items}
    scores = {split: entity_counts([e.tags for e in examples[split]], tags[split]) for split in items}
    return history, tags, scores

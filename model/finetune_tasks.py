"""The kinds of fine-tuning task `albert finetune` runs, behind one small interface that
model/finetune.py's comparison drives (pretrained x seeds, scratch grid, linear baselines):

- `metric`: the task's headline metric, the one the report, the flows and the gate compare
  ("accuracy" for classification, "entity_f1" for named entities);
- `labels`, `sizes`: what the report records; `train_items`: the items a training epoch goes through
  (examples; for NER their windows), from which a run's planned steps follow;
- `new_model(config, seed, state, checkpoint)`: a fresh classifier, the pretrained backbone loaded
  when `state` is given;
- `train(model, cfg, device, log, progress) -> ModelRun`: fine-tune with dev early stopping, then
  score every split (`progress`: the command's model.finetune_progress.FinetuneProgress, or None);
- `baselines(log) -> [(name, ModelRun)]`: the models without pretraining, fitted on train and
  chosen on dev;
- `floor()`: the training-set metric of a model that learnt nothing (the majority rate; 0 entity F1),
  against which the from-scratch model's fit is checked.

ClassificationTask: sentences or sentence pairs (model/finetune_data.py), baselines
model/text_baselines.py's. NerTask: People's Daily entities as character BIO tags (model/ner_data.py,
model/ner_encoding.py, model/ner_finetune.py), baselines model/ner_baselines.py's.

A ModelRun holds, per split, the per-example scores the statistics read (promotion.samples:
classification {"correct": bool (n,)}; NER the per-example entity counts) and the readable metrics of
that one run.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.errors import UserError
from model.finetune_data import Encoder, Example
from model.finetune_train import (
    FinetuneConfig,
    grouped_by_length,
    metrics,
    new_classifier,
    predict,
    train_classifier,
)
from model.text_baselines import BaselineConfig, linear_baselines, majority_rate


@dataclass
class ModelRun:
    """One model trained (one seed) or fitted (a deterministic baseline) once."""

    seed: int | None
    """The fine-tuning seed; None for a deterministic baseline."""
    training: dict
    """The training history (neural) or the grid chosen on dev (baselines): the report's "training"."""
    scores: dict[str, dict[str, np.ndarray]]
    """split -> per-example arrays (promotion.samples.DownstreamSample's, one entry per example)."""
    metrics: dict[str, dict]
    """split -> readable metrics of this run (accuracy, macro-F1, ...; entity F1, precision, recall)."""


@dataclass
class Tuned:
    """One neural model fine-tuned by the recipe (model.finetune.tune): every setting of the grid on the first seed,
    the setting chosen on dev, then the other seeds at that setting."""

    grid: list[tuple[float, float]]
    search: list[ModelRun]  # per setting of the grid, the first seed
    chosen: int  # index into grid
    runs: list[ModelRun]  # per seed at the chosen setting; runs[0] is search[chosen]

    @property
    def setting(self) -> tuple[float, float]:
        return self.grid[self.chosen]


class ClassificationTask:
    """Sentences or sentence pairs with one label each; accuracy, right or wrong per example."""

    metric = "accuracy"
    floor_name = "majority rate"

    def __init__(
        self, name: str, examples: dict[str, list[Example]], encoder: Encoder, baselines: BaselineConfig
    ):
        self.name = name
        labels = {label: i for i, label in enumerate(sorted({e.label for e in examples["train"]}))}
        if len(labels) < 2:
            raise UserError("the training data has a single label")
        self.labels = list(labels)
        self.examples = examples
        self.data = {split: encoder.encode(items, labels) for split, items in examples.items()}
        self.gold = {split: np.array([y for _, _, y in items]) for split, items in self.data.items()}
        self.sizes = {split: len(items) for split, items in self.data.items()}
        self.train_items = len(self.data["train"])
        self.baseline_config = baselines

    def new_model(self, config, seed: int, state: dict | None, checkpoint: str):
        from model.classifiers import AlbertForSequenceClassification

        return new_classifier(
            AlbertForSequenceClassification, config, len(self.labels), seed, state, checkpoint
        )

    def train(self, model, cfg: FinetuneConfig, device, log, progress=None) -> ModelRun:
        # Batches of similar length: random ones pad every review to the longest of its batch (the
        # reviews run from a few tokens to the full length), which doubled the cost of a step. Sorted
        # within pools of 8 batches, so that a batch's company still changes from epoch to epoch.
        lengths = [len(ids) for ids, _, _ in self.data["train"]]
        history = train_classifier(
            model, self.data["train"], self.data["dev"], cfg, len(self.labels), device, log,
            epoch_order=grouped_by_length(lengths, cfg.batch_size, pool=8), progress=progress,
        )  # fmt: skip
        predicted = {
            split: predict(model, items, 2 * cfg.batch_size, device) for split, items in self.data.items()
        }
        return self._run(cfg.seed, history, predicted)

    def baselines(self, log) -> list[tuple[str, ModelRun]]:
        texts = {
            split: ([(e.text_a, e.text_b) for e in items], self.gold[split])
            for split, items in self.examples.items()
        }
        results = linear_baselines(texts, len(self.labels), self.baseline_config)
        for result in results:
            log(f"{result.name}: {result.parameter} {result.chosen:g} chosen on dev ({result.seconds} s)")
        return [(r.name, self._run(None, r.summary(), r.predictions)) for r in results]

    def floor(self) -> float:
        return majority_rate(self.gold["train"])

    def _run(self, seed: int | None, training: dict, predicted: dict[str, np.ndarray]) -> ModelRun:
        return ModelRun(
            seed,
            training,
            scores={split: {"correct": predicted[split] == gold} for split, gold in self.gold.items()},
            metrics={
                split: metrics(predicted[split], gold, len(self.labels)) for split, gold in self.gold.items()
            },
        )


class NerTask:
    """Named entities, a BIO tag per character; entity F1 (exact span and type), and per example the
    entity counts (true positives, false positives, false negatives)."""

    metric = "entity_f1"
    floor_name = "a model that finds no entity"

    def __init__(self, name: str, examples: dict, encoder, baselines, head: str = "linear"):
        from model.ner_data import BIO_TAGS

        self.name = name
        self.labels = list(BIO_TAGS)
        self.examples = examples
        self.items = {split: encoder.encode(items) for split, items in examples.items()}
        self.gold = {split: [e.tags for e in items] for split, items in examples.items()}
        self.sizes = {split: len(items) for split, items in examples.items()}
        self.train_items = len(self.items["train"])
        self.baseline_config = baselines
        self.head = head  # the output layer, model.ner_finetune.NER_HEADS

    def new_model(self, config, seed: int, state: dict | None, checkpoint: str):
        from model.ner_finetune import token_classifier

        return token_classifier(config, len(self.labels), seed, state, checkpoint, self.head)

    def train(self, model, cfg: FinetuneConfig, device, log, progress=None) -> ModelRun:
        from model.ner_finetune import train_ner_model

        history, tags, _ = train_ner_model(model, self.items, self.examples, cfg, device, log, progress)
        return self._run(cfg.seed, history, tags)

    def baselines(self, log) -> list[tuple[str, ModelRun]]:
        from model.ner_baselines import ner_baselines

        results = ner_baselines(self.examples, self.baseline_config, log)
        return [(r.name, self._run(None, r.summary(), r.predictions)) for r in results]

    def floor(self) -> float:
        return 0.0

    def _run(self, seed: int | None, training: dict, tags: dict[str, list[list[str]]]) -> ModelRun:
        from model.ner_data import entity_counts, entity_scores

        scores = {split: entity_counts(gold, tags[split]) for split, gold in self.gold.items()}
        return ModelRun(
            seed, training, scores, {split: entity_scores(counts) for split, counts in scores.items()}
        )

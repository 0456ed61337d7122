"""The per-character scores of the NER baselines over character-window features: the features of N
positions (`WindowFeatures`), their sum through a table with a backward that sorts once (`WindowSum`),
and the linear scorer (`WindowModel`). The per-character logistic regression (model/ner_baselines.py)
and the linear-chain CRF (model/ner_crf.py) both score characters this way; a module of its own so
that neither imports the other's."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F


@dataclass
class WindowFeatures:
    """The (N, V) 0/1 feature matrix of N character positions, stored as the column of each position's
    feature under every template: `ids` (N, len(TEMPLATES))."""

    ids: torch.Tensor  # (N, K) int64
    shape: tuple[int, int]
    _by_feature: tuple[torch.Tensor, torch.Tensor] | None = None

    def by_feature(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(positions, starts): the positions sorted by feature (one entry per template hit) and where
        each feature's run starts; computed once (a sort of N K ids), used by every backward."""
        if self._by_feature is None:
            flat = self.ids.flatten()
            order = torch.argsort(flat, stable=True)
            starts = torch.searchsorted(flat[order], torch.arange(self.shape[1]))
            self._by_feature = (order // self.ids.shape[1], starts)
        return self._by_feature


class WindowSum(torch.autograd.Function):
    """scores (N, tags) = X table: the sum over templates of each position's feature rows of table
    (V, tags). The backward is X^T grad, the sum of the gradient rows of the positions that have each
    feature: an embedding_bag over positions grouped by feature (WindowFeatures.by_feature), whose
    sort is done once rather than at every step as torch's own embedding_bag backward does."""

    @staticmethod
    def forward(ctx, table: torch.Tensor, features: WindowFeatures) -> torch.Tensor:
        ctx.features = features
        return F.embedding_bag(features.ids, table, mode="sum")

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        positions, starts = ctx.features.by_feature()
        return F.embedding_bag(positions, grad.contiguous(), starts, mode="sum"), None


@dataclass
class WindowModel:
    """Per-character tag scores: X table + bias (float32)."""

    table: torch.Tensor  # (V, tags)
    bias: torch.Tensor  # (tags,)

    def scores(self, features: WindowFeatures) -> torch.Tensor:
        return WindowSum.apply(self.table, features) + self.bias  # (N, tags)

    def predict(self, features: WindowFeatures) -> np.ndarray:
        with torch.no_grad():
            return self.scores(features).argmax(-1).numpy()

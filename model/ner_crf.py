"""A linear-chain CRF over character windows, the classic strong baseline for Chinese NER
("char_ngram_crf" of model/ner_baselines.py).

The score of a tag sequence y over a paragraph's characters:
    sum_t emission[t, y_t] + sum_{t>0} transition[y_{t-1}, y_t] + start[y_0] + end[y_last],
with emission = X table + bias over the window features of model/ner_baselines.py (model/ner_windows.py). Training
minimises the negative log-likelihood per character, (log Z - gold score) / characters, + (l2/2)|table|^2,
with log Z from the forward algorithm; decoding is Viterbi. Both run on all the paragraphs of a split at
once: the paragraphs sorted by length (longest first), so that at step t the paragraphs still running
are a prefix of the batch (`Chains`), and each step is one (n_t, tags, tags) operation: the chain
algorithms of model/linear_chain.py, which the fine-tuned token classifier's CRF layer shares.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from model.linear_chain import Chains, gold_score, log_partition, viterbi
from model.ner_windows import WindowFeatures, WindowModel, WindowSum
from model.text_baselines import minimize_lbfgs

__all__ = ["Chains", "CrfModel", "fit_crf", "gold_score", "log_partition", "predict_crf", "viterbi"]


@dataclass
class CrfModel:
    """Emission weights (WindowModel's table and bias) and the chain's (tags, tags) transition scores
    (from row to column), with the scores of starting and ending in each tag."""

    emission: WindowModel
    transitions: torch.Tensor  # (tags, tags)
    start: torch.Tensor  # (tags,)
    end: torch.Tensor  # (tags,)

    @classmethod
    def from_linear(cls, linear: WindowModel) -> CrfModel:
        tags = linear.bias.shape[0]
        return cls(linear, torch.zeros(tags, tags), torch.zeros(tags), torch.zeros(tags))

    def parameters(self) -> list[torch.Tensor]:
        return [self.emission.table, self.emission.bias, self.transitions, self.start, self.end]


def fit_crf(
    features: WindowFeatures, chains: Chains, labels: torch.Tensor, l2: float, max_iter: int, start: CrfModel
) -> CrfModel:
    """Minimise (log Z - gold score) / characters + (l2/2)|table|^2 by full-batch L-BFGS from `start`
    (e.g. CrfModel.from_linear of the per-character model): deterministic."""
    parameters = [p.detach().clone().requires_grad_(True) for p in start.parameters()]
    model = CrfModel(WindowModel(*parameters[:2]), *parameters[2:])
    characters = labels.shape[0]

    def closure():
        for p in parameters:
            p.grad = None
        emissions = WindowSum.apply(model.emission.table, features) + model.emission.bias
        nll = log_partition(emissions, chains, model) - gold_score(emissions, chains, labels, model)
        loss = nll / characters + 0.5 * l2 * model.emission.table.pow(2).sum()
        loss.backward()
        return loss.detach()

    minimize_lbfgs(parameters, closure, max_iter)
    done = [p.detach() for p in parameters]
    return CrfModel(WindowModel(*done[:2]), *done[2:])


def predict_crf(model: CrfModel, features: WindowFeatures, chains: Chains) -> torch.Tensor:
    with torch.no_grad():
        return viterbi(model.emission.scores(features), chains, model)

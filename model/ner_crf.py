"""A linear-chain CRF over character windows, the classic strong baseline for Chinese NER
("char_ngram_crf" of model/ner_baselines.py).

The score of a tag sequence y over a paragraph's characters:
    sum_t emission[t, y_t] + sum_{t>0} transition[y_{t-1}, y_t] + start[y_0] + end[y_last],
with emission = X table + bias over the window features of model/ner_baselines.py (WindowSum). Training
minimises the negative log-likelihood per character, (log Z - gold score) / characters, + (l2/2)|table|^2,
with log Z from the forward algorithm; decoding is Viterbi. Both run on all the paragraphs of a split at
once: the paragraphs sorted by length (longest first), so that at step t the paragraphs still running
are a prefix of the batch (`Chains`), and each step is one (n_t, tags, tags) operation.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from model.ner_baselines import WindowFeatures, WindowModel, WindowSum
from model.text_baselines import minimize_lbfgs


@dataclass
class Chains:
    """Where the characters of a split's paragraphs sit in its flat (N, ...) arrays, for the step loops.

    steps[t]: the flat positions of character t of the paragraphs longer than t, in length order
    (longest first), so steps[t] is a prefix of steps[t - 1]'s paragraphs. previous / following: the
    flat positions of every pair of consecutive characters; first / last: of each paragraph's ends."""

    steps: list[torch.Tensor]
    previous: torch.Tensor
    following: torch.Tensor
    first: torch.Tensor
    last: torch.Tensor

    @classmethod
    def of(cls, lengths: list[int]) -> Chains:
        starts = torch.cumsum(torch.tensor([0, *lengths]), 0)[:-1]
        ordered = sorted((i for i, n in enumerate(lengths) if n), key=lambda i: -lengths[i])  # stable
        by_length = torch.tensor(ordered, dtype=torch.int64)
        sorted_lengths = torch.tensor([lengths[i] for i in ordered], dtype=torch.int64)
        longest = int(sorted_lengths[0]) if ordered else 0
        steps = [starts[by_length[sorted_lengths > t]] + t for t in range(longest)]
        nonempty = torch.tensor([i for i, n in enumerate(lengths) if n], dtype=torch.int64)
        ends = starts[nonempty] + torch.tensor(lengths, dtype=torch.int64)[nonempty] - 1
        is_last = torch.zeros(sum(lengths), dtype=torch.bool)
        is_last[ends] = True
        within = torch.arange(sum(lengths))[~is_last]  # characters with a next one in their paragraph
        return cls(steps, within, within + 1, starts[nonempty], ends)


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


def by_step(emissions: torch.Tensor, chains: Chains) -> list[torch.Tensor]:
    """emissions (N, tags) -> per step t, the rows of chains.steps[t]. One gather for all steps: its
    backward writes one (N, tags) gradient, where a gather per step wrote one per step (on the training
    split the forward algorithm's backward measured 1.1 s against 27 s)."""
    return list(emissions[torch.cat(chains.steps)].split([len(step) for step in chains.steps]))


def log_partition(emissions: torch.Tensor, chains: Chains, model: CrfModel) -> torch.Tensor:
    """The sum over paragraphs of log Z, by the forward algorithm. emissions (N, tags)."""
    total = emissions.new_zeros(())
    if not chains.steps:  # no characters
        return total
    steps = by_step(emissions, chains)
    alpha = model.start + steps[0]  # (n_0, tags): log-sum of the paths to each tag
    for t in range(1, len(chains.steps) + 1):
        running = len(chains.steps[t]) if t < len(chains.steps) else 0
        if running < alpha.shape[0]:  # paragraphs that ended at t - 1
            total = total + torch.logsumexp(alpha[running:] + model.end, dim=1).sum()
        if running:
            alpha = torch.logsumexp(alpha[:running, :, None] + model.transitions, dim=1) + steps[t]
    return total


def gold_score(
    emissions: torch.Tensor, chains: Chains, labels: torch.Tensor, model: CrfModel
) -> torch.Tensor:
    """The sum over paragraphs of the score of their gold tags. labels (N,)."""
    return (
        emissions.gather(1, labels[:, None]).sum()
        + model.transitions[labels[chains.previous], labels[chains.following]].sum()
        + model.start[labels[chains.first]].sum()
        + model.end[labels[chains.last]].sum()
    )


@torch.no_grad()
def viterbi(emissions: torch.Tensor, chains: Chains, model: CrfModel) -> torch.Tensor:
    """(N,) the tag ids of the best-scoring path of every paragraph."""
    tags = torch.zeros(emissions.shape[0], dtype=torch.int64)
    if not chains.steps:  # no characters
        return tags
    steps = by_step(emissions, chains)
    best = model.start + steps[0]  # (n_0, tags): the best path's score to each tag
    pointers = []  # pointers[t - 1][i, tag]: the previous tag of the best path to `tag` at step t
    final = torch.zeros(len(chains.first), dtype=torch.int64)  # in length order
    for t in range(1, len(chains.steps) + 1):
        running = len(chains.steps[t]) if t < len(chains.steps) else 0
        if running < best.shape[0]:
            final[running : best.shape[0]] = (best[running:] + model.end).argmax(1)
        if running:
            scores, previous = (best[:running, :, None] + model.transitions).max(dim=1)
            pointers.append(previous)
            best = scores + steps[t]
    current = final.clone()
    for t in range(len(chains.steps) - 1, -1, -1):  # back from the end: the paragraphs running at t
        running = len(chains.steps[t])
        tags[chains.steps[t]] = current[:running]
        if t:  # (the paragraphs that end at t - 1 still hold their final tag)
            current[:running] = pointers[t - 1].gather(1, current[:running, None])[:, 0]
    return tags


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

"""Linear-chain CRF algorithms over many chains at once: the forward algorithm (log Z), the score of
given tags, and Viterbi decoding. Two models use them: the linear-chain CRF baseline over character
n-gram windows (model/ner_crf.py) and the CRF output layer of the fine-tuned token classifier
(model/classifiers.py, `--ner-head crf`).

The score of a tag sequence y over a chain of T items with emission scores e (T, tags):
    sum_t e[t, y_t] + sum_{t>0} transitions[y_{t-1}, y_t] + start[y_0] + end[y_last].
Every chain of a batch sits in one flat (N, tags) emission array, chain after chain. The chains are
walked in length order (longest first), so that at step t the chains still running are a prefix
(`Chains`), and each step is one (n_t, tags, tags) operation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch


class ChainScores(Protocol):
    """The chain's own scores: (tags, tags) transitions (from row to column), and the (tags,) scores
    of starting and ending in each tag."""

    transitions: torch.Tensor
    start: torch.Tensor
    end: torch.Tensor


@dataclass
class TransitionScores:
    """ChainScores held by a model under other names (model.classifiers' CRF layer)."""

    transitions: torch.Tensor
    start: torch.Tensor
    end: torch.Tensor


@dataclass
class Chains:
    """Where the items of the chains (characters of paragraphs, units of windows) sit in the flat
    (N, ...) arrays, chain after chain, for the step loops.

    steps[t]: the flat positions of item t of the chains longer than t, in length order (longest
    first), so steps[t] is a prefix of steps[t - 1]'s chains. previous / following: the flat positions
    of every pair of consecutive items; first / last: of each chain's ends. Empty chains are skipped."""

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


def by_step(emissions: torch.Tensor, chains: Chains) -> list[torch.Tensor]:
    """emissions (N, tags) -> per step t, the rows of chains.steps[t]. One gather for all steps: its
    backward writes one (N, tags) gradient, where a gather per step wrote one per step (on the training
    split the forward algorithm's backward measured 1.1 s against 27 s)."""
    return list(emissions[torch.cat(chains.steps)].split([len(step) for step in chains.steps]))


def log_partition(emissions: torch.Tensor, chains: Chains, chain: ChainScores) -> torch.Tensor:
    """The sum over paragraphs of log Z, by the forward algorithm. emissions (N, tags)."""
    total = emissions.new_zeros(())
    if not chains.steps:  # no characters
        return total
    steps = by_step(emissions, chains)
    alpha = chain.start + steps[0]  # (n_0, tags): log-sum of the paths to each tag
    for t in range(1, len(chains.steps) + 1):
        running = len(chains.steps[t]) if t < len(chains.steps) else 0
        if running < alpha.shape[0]:  # paragraphs that ended at t - 1
            total = total + torch.logsumexp(alpha[running:] + chain.end, dim=1).sum()
        if running:
            alpha = torch.logsumexp(alpha[:running, :, None] + chain.transitions, dim=1) + steps[t]
    return total


def gold_score(
    emissions: torch.Tensor, chains: Chains, labels: torch.Tensor, chain: ChainScores
) -> torch.Tensor:
    """The sum over paragraphs of the score of their gold tags. labels (N,)."""
    return (
        emissions.gather(1, labels[:, None]).sum()
        + chain.transitions[labels[chains.previous], labels[chains.following]].sum()
        + chain.start[labels[chains.first]].sum()
        + chain.end[labels[chains.last]].sum()
    )


@torch.no_grad()
def viterbi(emissions: torch.Tensor, chains: Chains, chain: ChainScores) -> torch.Tensor:
    """(N,) the tag ids of the best-scoring path of every paragraph."""
    tags = torch.zeros(emissions.shape[0], dtype=torch.int64)
    if not chains.steps:  # no characters
        return tags
    steps = by_step(emissions, chains)
    best = chain.start + steps[0]  # (n_0, tags): the best path's score to each tag
    pointers = []  # pointers[t - 1][i, tag]: the previous tag of the best path to `tag` at step t
    final = torch.zeros(len(chains.first), dtype=torch.int64)  # in length order
    for t in range(1, len(chains.steps) + 1):
        running = len(chains.steps[t]) if t < len(chains.steps) else 0
        if running < best.shape[0]:
            final[running : best.shape[0]] = (best[running:] + chain.end).argmax(1)
        if running:
            scores, previous = (best[:running, :, None] + chain.transitions).max(dim=1)
            pointers.append(previous)
            best = scores + steps[t]
    current = final.clone()
    for t in range(len(chains.steps) - 1, -1, -1):  # back from the end: the paragraphs running at t
        running = len(chains.steps[t])
        tags[chains.steps[t]] = current[:running]
        if t:  # (the paragraphs that end at t - 1 still hold their final tag)
            current[:running] = pointers[t - 1].gather(1, current[:running, None])[:, 0]
    return tags

"""The linear-chain CRF of the NER baselines (model/ner_crf.py): the forward algorithm and Viterbi
equal brute force over every tag path of short paragraphs of different lengths, and transitions that
forbid a tag after another are never crossed."""

from __future__ import annotations

import itertools

import torch

from model.ner_crf import Chains, CrfModel, gold_score, log_partition, viterbi
from model.ner_data import BIO_TAGS
from model.ner_windows import WindowModel

TAGS = 3  # brute force over 3 tags: 3^4 paths for 4 characters


def _model(seed: int = 0, tags: int = TAGS) -> CrfModel:
    generator = torch.Generator().manual_seed(seed)
    emission = WindowModel(torch.zeros(1, tags), torch.zeros(tags))
    return CrfModel(
        emission, *(torch.randn(*shape, generator=generator) for shape in ((tags, tags), (tags,), (tags,)))
    )


def _path_score(emissions: torch.Tensor, path: tuple[int, ...], model: CrfModel) -> torch.Tensor:
    score = model.start[path[0]] + model.end[path[-1]] + sum(emissions[t, y] for t, y in enumerate(path))
    return score + sum(model.transitions[a, b] for a, b in zip(path, path[1:]))


def test_forward_algorithm_and_viterbi_equal_brute_force():
    lengths = [3, 1, 4, 0, 2]  # unsorted, one empty: the chains sort them
    chains = Chains.of(lengths)
    model = _model()
    emissions = torch.randn(sum(lengths), TAGS, generator=torch.Generator().manual_seed(1))
    starts = [sum(lengths[:i]) for i in range(len(lengths))]
    expected_log_z, expected_tags = torch.zeros(()), []
    for start, n in zip(starts, lengths):
        if not n:
            continue
        own = emissions[start : start + n]
        scores = {path: _path_score(own, path, model) for path in itertools.product(range(TAGS), repeat=n)}
        expected_log_z = expected_log_z + torch.logsumexp(torch.stack(list(scores.values())), 0)
        expected_tags += list(max(scores, key=lambda path: float(scores[path])))
    torch.testing.assert_close(log_partition(emissions, chains, model), expected_log_z)
    assert viterbi(emissions, chains, model).tolist() == expected_tags
    gold = torch.tensor(expected_tags)
    by_hand = sum(
        _path_score(emissions[s : s + n], tuple(expected_tags[s : s + n]), model)
        for s, n in zip(starts, lengths)
        if n
    )
    torch.testing.assert_close(gold_score(emissions, chains, gold, model), by_hand)


def test_forbidden_transitions_are_never_taken():
    """Emissions that favour I-PER everywhere, transitions that forbid I-X after O or at the start:
    per character the argmax is I-PER, Viterbi's paths are well-formed BIO."""
    tags = len(BIO_TAGS)
    model = _model(tags=tags)
    model.transitions.zero_()
    model.start.zero_()
    for j, tag in enumerate(BIO_TAGS):
        if tag.startswith("I-"):
            model.start[j] = -1e4
            for i, previous in enumerate(BIO_TAGS):
                if previous == "O" or (previous != "O" and previous[2:] != tag[2:]):
                    model.transitions[i, j] = -1e4
    emissions = torch.randn(12, tags, generator=torch.Generator().manual_seed(2))
    emissions[:, BIO_TAGS.index("I-PER")] += 5
    emissions[4, BIO_TAGS.index("O")] += 20  # an O in the middle: what follows must start anew
    chains = Chains.of([7, 5])
    assert emissions.argmax(1).tolist().count(BIO_TAGS.index("I-PER")) == 11
    tags_found = [BIO_TAGS[i] for i in viterbi(emissions, chains, model).tolist()]
    for paragraph in (tags_found[:7], tags_found[7:]):
        for previous, tag in zip(["O", *paragraph], paragraph):
            assert not tag.startswith("I-") or previous[2:] == tag[2:], paragraph
    assert tags_found[4] == "O" and tags_found[5] == "B-PER"

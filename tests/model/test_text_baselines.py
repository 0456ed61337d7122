"""The character n-gram baselines of `albert finetune`: features from the training split only, a
logistic regression that fits separable data, naive Bayes equal to its posterior computed by hand,
and the regularisation chosen on dev."""

from __future__ import annotations

import math

import numpy as np
import pytest

from model.text_baselines import (
    BaselineConfig,
    NgramVocabulary,
    char_ngrams,
    choose_on_dev,
    fit_logistic_regression,
    fit_naive_bayes,
    float_list,
    linear_baselines,
    majority_rate,
)


def test_ngrams_and_vocabulary_from_training_split_only():
    assert char_ngrams("好吃", 2) == ["好", "吃", "好吃"]
    vocabulary = NgramVocabulary.fit([("好吃", None), ("好看", "吃")], max_n=2, min_count=2)
    assert set(vocabulary.index) == {"好"}  # 吃 twice, but once in text_b's namespace
    vocabulary = NgramVocabulary.fit([("好吃", None), ("好看", "吃")], max_n=2, min_count=1)
    assert "\t吃" in vocabulary.index and "好吃" in vocabulary.index
    counts = vocabulary.counts([("好好坏", None)])  # 坏 and 好坏 are unseen in training: dropped
    assert counts.shape == (1, len(vocabulary.index))
    assert dict(zip(counts.columns.tolist(), counts.values.tolist())) == {vocabulary.index["好"]: 2.0}
    tfidf = vocabulary.tfidf([("好吃好", None)])
    assert math.isclose(float(np.sum(tfidf.values**2)), 1.0)  # unit rows


def test_logistic_regression_fits_separable_data():
    train = [("好", "pos"), ("好好", "pos"), ("很好", "pos"), ("差", "neg"), ("差差", "neg"), ("很差", "neg")]
    vocabulary = NgramVocabulary.fit([(t, None) for t, _ in train], max_n=1, min_count=1)
    features = vocabulary.tfidf([(t, None) for t, _ in train])
    labels = np.array([int(y == "pos") for _, y in train])
    model = fit_logistic_regression(features, labels, 2, l2=1e-4)
    assert model.predict(features).tolist() == labels.tolist()
    assert model.predict(vocabulary.tfidf([("真好", None), ("真差", None)])).tolist() == [1, 0]
    again = fit_logistic_regression(features, labels, 2, l2=1e-4)
    assert np.array_equal(model.weight, again.weight)  # from zeros, no randomness
    strong = fit_logistic_regression(features, labels, 2, l2=10.0)
    assert np.abs(strong.weight).sum() < np.abs(model.weight).sum()  # the penalty shrinks the weights


def test_naive_bayes_matches_the_posterior_by_hand():
    # class 0: "aab", class 1: "b", "bc"; vocabulary a, b, c (1-grams), alpha 1
    train = [("aab", 0), ("b", 1), ("bc", 1)]
    vocabulary = NgramVocabulary.fit([(t, None) for t, _ in train], max_n=1, min_count=1)
    model = fit_naive_bayes(vocabulary.counts([(t, None) for t, _ in train]), np.array([0, 1, 1]), 2, 1.0)
    # P(a|0) = (2+1)/(3+3), P(b|0) = (1+1)/6, P(c|0) = 1/6; P(a|1) = 1/6, P(b|1) = 3/6, P(c|1) = 2/6
    # "ab": P(0) P(a|0) P(b|0) = 1/3 * 3/6 * 2/6;  P(1) P(a|1) P(b|1) = 2/3 * 1/6 * 3/6
    joint = np.array([1 / 3 * 3 / 6 * 2 / 6, 2 / 3 * 1 / 6 * 3 / 6])
    scores = vocabulary.counts([("ab", None)]).times(model.weight) + model.bias
    posterior = np.exp(scores[0] - np.logaddexp.reduce(scores[0]))
    assert posterior == pytest.approx(joint / joint.sum())
    assert model.predict(vocabulary.counts([("ab", None), ("cc", None)])).tolist() == [0, 1]


def test_choose_on_dev_keeps_the_best_and_the_first_of_a_tie():
    dev_accuracy = {0.1: 0.6, 0.01: 0.8, 0.001: 0.8, 0.0001: 0.7}
    best, model, scores = choose_on_dev(list(dev_accuracy), lambda v: v, lambda v: dev_accuracy[v])
    assert (best, model, scores) == (1, 0.01, [0.6, 0.8, 0.8, 0.7])


def test_linear_baselines_choose_their_strength_on_dev():
    rng = np.random.default_rng(0)

    def split(n):
        texts, labels = [], []
        for _ in range(n):
            label = int(rng.integers(2))
            chars = (
                rng.choice(list("好棒赞" if label else "差烂糟"), 2).tolist()
                + rng.choice(list("的了是在"), 4).tolist()
            )
            rng.shuffle(chars)
            texts.append(("".join(chars), None))
            labels.append(label)
        return texts, np.array(labels)

    splits = {"train": split(60), "dev": split(30), "test": split(30)}
    cfg = BaselineConfig(ngram_max=2, ngram_min_count=1, logreg_l2=(10.0, 1e-3), naive_bayes_alpha=(1.0, 0.1))
    results = {r.name: r for r in linear_baselines(splits, 2, cfg)}
    for result in results.values():
        dev = (result.predictions["dev"] == splits["dev"][1]).mean()
        assert result.dev_accuracies[result.grid.index(result.chosen)] == max(result.dev_accuracies) == dev
        assert (result.predictions["test"] == splits["test"][1]).mean() > 0.9
        assert set(result.predictions) == {"train", "dev", "test"}
    summary = results["char_ngram_logreg"].summary()
    assert summary["parameter"] == "l2" and [g["l2"] for g in summary["grid"]] == [10.0, 1e-3]


def test_float_list_and_majority_rate():
    assert float_list("1e-3, 5e-4") == (1e-3, 5e-4)
    with pytest.raises(ValueError):
        float_list("fast")
    assert majority_rate(np.array([0, 1, 1, 1])) == 0.75

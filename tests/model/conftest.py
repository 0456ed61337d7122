"""Fixtures of the model tests: a tiny config and a toy pretraining batch (see tiny.py)."""

from __future__ import annotations

import pytest
import torch

from model.config import AlbertConfig
from tests.model.tiny import tiny_config, toy_batch
from tests.model.train_fixtures import instances_dir, model_config_file  # noqa: F401 (training tests)


@pytest.fixture
def config() -> AlbertConfig:
    return tiny_config()


@pytest.fixture
def batch() -> dict[str, torch.Tensor]:
    return toy_batch()

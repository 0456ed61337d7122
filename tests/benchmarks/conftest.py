"""Fixtures of the benchmark tests: the training tests' small real instance set (session scope)."""

from __future__ import annotations

from tests.model.train_fixtures import instances_dir  # noqa: F401 (benchmarks/train.py)

"""Fixtures of the fault tests: the tmpfs mounts (tests/faults/__init__.py), and the training tests'
instances and tiny model config."""

from tests.faults import mounts  # noqa: F401
from tests.model.train_fixtures import instances_dir, model_config_file  # noqa: F401

"""The XLA tests (`make test-tpu`, in .venv-tpu: torch 2.9 + torch_xla 2.9, docs/tpu.md) run on XLA's CPU
device: PJRT_DEVICE=CPU, set here before torch_xla starts its runtime. Each test module skips itself
where torch_xla is not importable, so the default suite (the main set, torch 2.13) runs without it."""

from __future__ import annotations

import importlib.util
import os

# Only where torch_xla is there (.venv-tpu): pytest imports this file in the main suite's session too, and
# a PJRT_DEVICE left there would make every `--device auto` of that session mean XLA (model/device.py).
if importlib.util.find_spec("torch_xla") is not None:
    os.environ.setdefault("PJRT_DEVICE", "CPU")

from tests.model.train_fixtures import instances_dir, model_config_file  # noqa: E402, F401 (the training fixtures)

"""The pretrain flow's run folder keys are pinned: the same flow parameters and extra_args name the same
run folder as before, so an existing run is found and resumed (computed with the flow as it was)."""

from __future__ import annotations

import json
import os

import pytest

from core import storage
from flows.pretrain import run_key

FLOW_DEFAULTS = dict(
    config="tiny", steps=200, batch_size=32, micro_batch_size=None, optimizer="lamb", lr=None,
    warmup_steps=None, seed=12345, init_checkpoint=None, save_every=100, log_every=10, eval_every=None,
    device="auto", precision="auto",
)  # fmt: skip

RUN_ONLY_ARGS = [
    "--save-every", "2", "--compile", "--device=cpu", "--parallel", "fsdp", "--max-minutes", "30", "--force",
    "--num-workers", "0", "--keep-last", "2", "--eval-batches", "5", "--log-every", "3", "--eval-every", "7",
]  # fmt: skip

PINNED = [
    ({}, [], "ce6b4f3ada9569d2"),
    (
        dict(steps=8, batch_size=8, lr=0.01, warmup_steps=2, save_every=2, log_every=1, eval_every=4, device="cpu"),
        [],
        "a48b8b3ed15f7a55",
    ),
    (
        dict(config="model.json", micro_batch_size="auto", precision="bf16", optimizer="adamw", seed=7),
        [],
        "d69c00ab417302b8",
    ),
    (dict(init_checkpoint="init", micro_batch_size=4), [], "a873e5b958c7b0d1"),
    ({}, RUN_ONLY_ARGS, "ce6b4f3ada9569d2"),  # run-only options do not name the run
    (
        {},
        ["--set", "hidden_dropout_prob=0.1", "--weight-decay", "0.02", "--save-every=4", "--clip-norm", "0.5"],
        "20d38d66d07d4b1c",
    ),
    (
        {},
        ["--shuffle-window", "100", "--output-bias-init", "zeros", "--max-bad-steps", "3", "--vocab", "v/spm.model"],
        "869f7a85ea027240",
    ),
]  # fmt: skip


@pytest.fixture
def inputs(tmp_path, monkeypatch) -> str:
    """An instances folder with a fixed manifest, a config file and initial weights of fixed content."""
    monkeypatch.chdir(tmp_path)
    os.makedirs("instances")
    outputs = {"train-00000.tfrecord": "ab" * 32, "eval-00000.tfrecord": "cd" * 32}
    json.dump({"stage": "instances", "outputs": outputs}, open("instances/manifest.json", "w"))
    open("model.json", "w").write('{"hidden_size": 32}\n')
    os.makedirs("init")
    open("init/model.safetensors", "wb").write(b"weights")
    return storage.absolute("instances")


@pytest.mark.parametrize("params, extra_args, key", PINNED)
def test_run_folder_keys_stay_the_same(inputs, params, extra_args, key):
    options = {**FLOW_DEFAULTS, **params}
    if options["init_checkpoint"]:
        options["init_checkpoint"] = storage.absolute(options["init_checkpoint"])
    assert run_key(inputs, options, extra_args) == key

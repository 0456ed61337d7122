"""The pretrain flow's run folder keys are pinned: the same flow parameters and extra_args name the same
run folder as before, so an existing run is found and resumed (computed with the flow as it was, from
its raw parameters and extra_args; now from the one TrainConfig the flow builds of them)."""

from __future__ import annotations

import json
import os

import pytest

from core import storage
from flows.pretrain import run_key, trainer_config

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
    run_dir = storage.absolute("runs/any")  # run-only: not part of the key
    assert run_key(*trainer_config(inputs, run_dir, options, extra_args)) == key


# Keys of the flow as it was (its raw parameters and extra_args hashed), for inputs where the config alone
# no longer tells what the flow was given: an option set by extra_args that is also a flow parameter
# (the old key held the flow's default and the flag), a config or initial weights named in extra_args
# (the old key held the flag, not their content), repeated --set.
MAPPED = [
    ({}, ["--steps", "300"], "936c69f3362a4e96"),
    ({}, ["--lr", "0.001", "--warmup-steps", "10"], "f376a1fc902656d0"),
    ({}, ["--config", "model.json"], "16a4180eb0e0e0e8"),
    ({}, ["--init-checkpoint", "init", "--set", "hidden_act=gelu", "--set", "embedding_size=16"], "c52bb99a6696a10f"),
    ({}, ["--precision", "bf16", "--micro-batch-size", "auto"], "781f4115d8f0a168"),
]  # fmt: skip


def flow_key(inputs: str, params: dict, extra_args: list[str]) -> str:
    """The run key the flow computes: its one TrainConfig of these parameters and extra_args."""
    from flows.pretrain import run_key, trainer_config

    return run_key(
        *trainer_config(inputs, storage.absolute("runs/any"), {**FLOW_DEFAULTS, **params}, extra_args)
    )


@pytest.mark.parametrize("params, extra_args, key", MAPPED)
def test_the_one_time_mapping_keeps_the_keys_of_extra_args_over_flow_parameters(
    inputs, params, extra_args, key
):
    assert flow_key(inputs, params, extra_args) == key


def test_extra_args_lie_over_the_flow_parameters_in_one_config(inputs):
    from flows.pretrain import trainer_config

    options = {**FLOW_DEFAULTS, "steps": 8, "lr": 0.01}
    cfg, given = trainer_config(
        inputs, "/runs/x", options, ["--steps", "9", "--weight-decay=0.5", "--compile"]
    )
    assert (cfg.training.steps, cfg.optim.lr, cfg.optim.weight_decay, cfg.runtime.compile) == (
        9,
        0.01,
        0.5,
        True,
    )
    assert cfg.optim.warmup_steps == 100 and cfg.model.model == "tiny"  # None: the trainer's default
    assert given == ["steps", "weight_decay", "compile"]


def test_what_changes_the_training_changes_the_key_and_its_spelling_does_not(inputs):
    plain = flow_key(inputs, {}, [])
    assert flow_key(inputs, {}, ["--weight-decay", "0.5"]) != plain
    assert flow_key(inputs, {}, ["--weight-decay=0.5"]) == flow_key(inputs, {}, ["--weight-decay", "0.50"])
    assert flow_key(inputs, {"steps": 201}, []) != plain
    assert flow_key(inputs, {}, ["--keep-last", "9"]) == plain  # run-only


def test_an_option_the_first_keys_could_not_hold_still_names_the_run(inputs):
    """An option set otherwise than by extra_args or the flow's key parameters (a flow parameter added
    later) goes to the key's "more" part: two configs that train differently never share a folder."""
    from flows import pretrain

    cfg, given = pretrain.trainer_config(inputs, "/runs/x", FLOW_DEFAULTS, [])
    assert "more" not in pretrain.key_parts(cfg, given)
    cfg.training.max_bad_steps = 9
    assert pretrain.key_parts(cfg, given)["more"] == {"max_bad_steps": 9}
    assert pretrain.run_key(cfg, given) != pretrain.run_key(
        *pretrain.trainer_config(inputs, "/runs/x", FLOW_DEFAULTS, [])
    )


def test_flow_values_the_parser_never_saw_are_checked_like_its_choices(inputs):
    """The flow's parameters reach the config without the parser: TrainConfig.check refuses what its
    choices would have (before any work, as the parser did)."""
    from core.errors import UserError
    from flows.pretrain import trainer_config

    with pytest.raises(UserError, match=r"unknown --optimizer 'sgd'; expected lamb or adamw"):
        trainer_config(inputs, "/runs/x", {**FLOW_DEFAULTS, "optimizer": "sgd"}, [])


def test_the_flow_checks_its_config_before_the_run_folder_is_named(inputs):
    """Without run_dir the flow builds its config before the key names the run folder: an --out not
    yet named is not taken for the working directory, which holds the instances here."""
    from flows.pretrain import trainer_config

    cfg, _ = trainer_config(inputs, "", FLOW_DEFAULTS, [])
    assert cfg.out == "" and cfg.instances == inputs

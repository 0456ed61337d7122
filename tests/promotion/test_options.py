"""promotion.options: `albert promote`'s options generated from PromoteOptions, the action a command
line asks for, and the gate's numbers checked by GateConfig alone, named as the caller's user spells
them. (The command's messages end to end: tests/flows/test_trust_registry_cli.py.)"""

from __future__ import annotations

import argparse
import math

import pytest

from core import config_cli
from core.errors import UserError
from promotion.downstream import with_downstream
from promotion.gate import GateConfig
from promotion.options import PromoteOptions, flag, parameter


def parse(*argv: str) -> PromoteOptions:
    parser = argparse.ArgumentParser()
    config_cli.add_arguments(parser, PromoteOptions)
    return config_cli.from_args(PromoteOptions, parser.parse_args(list(argv)))


def test_the_flags_and_their_defaults():
    assert config_cli.option_flags(PromoteOptions) == {
        "--candidate", "--registry", "--model", "--rollback", "--set-production", "--reason", "--instances",
        "--spm-model", "--min-improvement", "--max-regression", "--alpha", "--allow-below-scratch",
        "--max-batches",
    }  # fmt: skip
    options = parse("--registry", "reg")
    assert options == PromoteOptions(registry="reg")
    assert (options.model_name, options.reason, options.max_batches) == ("albert", "", None)
    gate = GateConfig()
    assert (options.min_improvement, options.max_regression, options.alpha) == (
        gate.min_improvement,
        gate.max_regression,
        gate.alpha,
    )
    options = parse(
        "--registry", "r", "--model", "m", "--instances", "i", "--alpha", "0.01", "--max-batches", "3"
    )
    assert (options.model_name, options.instances_dir, options.alpha, options.max_batches) == (
        "m",
        "i",
        0.01,
        3,
    )


def test_the_registry_is_required():
    with pytest.raises(SystemExit):
        parse("--candidate", "c")


def test_a_field_is_named_by_its_flag_or_its_parameter():
    assert flag("model_name") == "--model" and flag("instances_dir") == "--instances"
    assert flag("min_improvement") == "--min-improvement"
    assert parameter("model_name") == "model_name"


@pytest.mark.parametrize(
    "argv, action",
    [
        (("--candidate", "c"), "promote"),
        (("--rollback",), "rollback"),
        (("--set-production", "v2"), "set-production"),
    ],
)
def test_the_action_a_command_line_asks_for(argv, action):
    assert parse("--registry", "r", *argv).action() == action


@pytest.mark.parametrize(
    "argv, message",
    [
        ((), "give --candidate DIR (or --rollback, or --set-production VERSION)"),
        (("--rollback", "--set-production", "v1"), "give --rollback or --set-production VERSION, not both"),
        (("--rollback", "--candidate", "c"), "--rollback takes no --candidate"),
        (("--set-production", "v1", "--candidate", "c"), "--set-production takes no --candidate"),
    ],
)
def test_a_combination_that_means_nothing_is_one_line(argv, message):
    with pytest.raises(UserError) as err:
        parse("--registry", "r", *argv).action()
    assert str(err.value) == message


@pytest.mark.parametrize(
    "changes, by_flag, by_parameter",
    [
        (
            dict(min_improvement=-0.1),
            "--min-improvement must be >= 0 (nats), got -0.1",
            "min_improvement must be",
        ),
        (dict(max_regression=1.5), "--max-regression must be in [0, 1), got 1.5", "max_regression must be"),
        (dict(alpha=0.7), "--alpha must be in (0, 0.5), got 0.7", "alpha must be in (0, 0.5)"),
        (dict(alpha=math.nan), "--alpha must be in (0, 0.5), got nan", "alpha must be in (0, 0.5), got nan"),
        (dict(alpha=math.inf), "--alpha must be in (0, 0.5), got inf", "alpha must be in (0, 0.5), got inf"),
    ],
)
def test_the_gate_numbers_are_checked_by_gate_config_and_named_for_the_caller(changes, by_flag, by_parameter):
    options = PromoteOptions(registry="r", **changes)
    with pytest.raises(UserError) as err:
        options.gate(flag)
    assert str(err.value) == by_flag
    with pytest.raises(UserError) as err:
        options.gate(parameter)
    assert str(err.value).startswith(by_parameter)
    with pytest.raises(UserError, match="^gate: "):  # GateConfig itself says the same rule its own way
        GateConfig(**changes)


def test_the_gate_the_options_configure():
    gate = PromoteOptions(registry="r", min_improvement=0.01, max_regression=0.02, alpha=0.01).gate(flag)
    assert (gate.min_improvement, gate.max_regression, gate.alpha) == (0.01, 0.02, 0.01)
    assert gate.allow_below_scratch is False  # a candidate below scratch is refused unless asked
    assert parse("--registry", "r", "--allow-below-scratch").gate(flag).allow_below_scratch is True


@pytest.mark.parametrize("max_batches", [0, -3, 1.5])
def test_max_batches_must_be_at_least_one(max_batches):
    with pytest.raises(UserError) as err:
        PromoteOptions(registry="r", max_batches=max_batches).check_max_batches(flag)
    assert str(err.value) == f"--max-batches must be at least 1, got {max_batches}"
    PromoteOptions(registry="r", max_batches=1).check_max_batches(flag)
    PromoteOptions(registry="r").check_max_batches(flag)


def test_downstream_accuracy_joins_the_metrics_of_both_models():
    cand, prod = {"mlm_loss": 2.0}, {"mlm_loss": 2.1}
    assert with_downstream(cand, prod, None) == (cand, prod)
    both = with_downstream(cand, prod, {"candidate": 0.8, "production": 0.85})
    assert both == (
        {"mlm_loss": 2.0, "downstream_accuracy": 0.8},
        {"mlm_loss": 2.1, "downstream_accuracy": 0.85},
    )
    no_production_result = with_downstream(cand, prod, {"candidate": 0.8, "production": None})
    assert no_production_result == ({"mlm_loss": 2.0, "downstream_accuracy": 0.8}, prod)
    assert with_downstream(cand, None, {"candidate": 0.8, "production": 0.85})[1] is None
    assert cand == {"mlm_loss": 2.0}  # the evaluations' metrics are not changed in place

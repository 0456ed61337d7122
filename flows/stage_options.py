"""A stage's options object from the flow's values and its pass-through arguments, through the stage
command's own generated parser (`albert COMMAND`): the flows then call the stage's typed function.
Arguments the parser refuses raise ArgumentError (a UserError) instead of exiting the process."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import MISSING
from typing import Any, TypeVar

from core import config_cli
from core.errors import UserError

T = TypeVar("T")


class ArgumentError(UserError):
    """Arguments a stage's parser refused (argparse would have exited the whole process)."""


class _StageParser(argparse.ArgumentParser):
    """argparse that raises instead of exiting: inside a flow, SystemExit would end the run Crashed,
    with no retry logic, failure artifact or message saying what was wrong."""

    def error(self, message: str):
        raise ArgumentError(f"{self.prog}: {message}")

    def exit(self, status: int = 0, message: str | None = None):
        raise ArgumentError(f"{self.prog}: {(message or '').strip() or f'exited with status {status}'}")


def stage_options(command: str, cls: type[T], argv: Sequence[str], **known: Any) -> T:
    """The options (a `cls`) that `albert COMMAND` would run with, given the values the flow sets
    (`known`, by option name, flat over sections) and then argv, its pass-through arguments, through
    the command's own generated parser. ArgumentError (a UserError) on arguments it refuses."""
    options, rest = stage_options_and_rest(command, cls, argv, **known)
    if rest:  # only a command that passes unknown options on (to Beam) leaves any
        raise ArgumentError(f"albert {command}: unrecognized arguments: {' '.join(rest)}")
    return options


def stage_options_and_rest(
    command: str, cls: type[T], argv: Sequence[str], **known: Any
) -> tuple[T, list[str]]:
    """stage_options, and the arguments the command leaves to Beam (PASSES_BEAM_ARGS: options it
    does not define go to Beam's PipelineOptions); [] for the other commands."""
    from flows.cli import command_module

    fields = [f for f, _ in config_cli.leaves(cls)]
    unknown = sorted(set(known) - {f.name for f in fields})
    if unknown:
        raise TypeError(f"{cls.__name__} has no option {unknown[0]!r}")
    module = command_module(command)
    parser = _StageParser(prog=f"albert {command}")
    module.add_arguments(parser)
    # The flow's values as the flags that rebuild them, then argv: a pass-through option wins, as a
    # later flag does on a command line. Required options the flow leaves to argv get a stand-in
    # value that is left out of the flags.
    unset = {
        f.name: None
        for f in fields
        if f.name not in known and f.default is MISSING and f.default_factory is MISSING
    }
    flags = config_cli.to_argv(config_cli.from_args(cls, {**unset, **known}), skip=tuple(unset))
    args = [*flags, *argv]
    if getattr(module, "PASSES_BEAM_ARGS", False):
        parsed, rest = parser.parse_known_args(args)
    else:
        parsed, rest = parser.parse_args(args), []
    return config_cli.from_args(cls, parsed), rest


def given_options(command: str, argv: Sequence[str]) -> dict[str, Any]:
    """{option name: value} of only the options argv sets, in the order it sets them, parsed once by
    `albert COMMAND`'s own generated parser: no defaults, no option required (the caller lays them over
    a config it built). ArgumentError (a UserError) on arguments the parser refuses."""
    from flows.cli import command_module

    parser = _StageParser(prog=f"albert {command}")
    command_module(command).add_arguments(parser)
    for action in parser._actions:  # argparse has no public switch for "only what is given"
        action.default, action.required = argparse.SUPPRESS, False
    for group in parser._mutually_exclusive_groups:
        group.required = False
    return vars(parser.parse_args(list(argv)))

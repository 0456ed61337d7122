"""Options defined once: the parser, the config and the argv generated from one dataclass agree."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import pytest

from core.config_cli import (
    add_arguments,
    flat,
    from_args,
    opt,
    option_flags,
    run_options,
    section,
    to_argv,
)


def _positive(text: str) -> int:
    if int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number, not {text!r}")
    return int(text)


@dataclass
class Optim:
    lr: float = opt(1e-3, "peak learning rate")
    optimizer: str = opt("lamb", "update rule", choices=("lamb", "adamw"))
    warmup_steps: int | None = opt(None, "warm-up")


@dataclass
class Run:
    compile: bool = opt(False, "torch.compile", run=True)
    plot: bool = opt(True, "write curves.png", run=True)
    nan_steps: tuple[int, ...] = opt((), "steps", parse=int, repeat=True)


@dataclass
class Config:
    instances: str = opt(help="instance folder")
    config: str = opt("tiny", "preset", flag="--config")
    steps: int = opt(10, "optimizer steps", parse=_positive)
    tags: list[str] = opt(help="labels", repeat=True)
    optim: Optim = section(Optim)
    run: Run = section(Run)


def parse(argv: list[str]) -> Config:
    parser = argparse.ArgumentParser(prog="t")
    add_arguments(parser, Config)
    return from_args(Config, parser.parse_args(argv))


def test_defaults_types_and_sections():
    cfg = parse(["--instances", "d"])
    assert cfg == Config(instances="d")
    assert cfg.optim.lr == 1e-3 and cfg.run.plot is True and cfg.tags == []
    cfg = parse(["--instances", "d", "--lr", "0.5", "--steps", "3", "--compile", "--no-plot", "--tags", "a"])
    assert (cfg.optim.lr, cfg.steps, cfg.run.compile, cfg.run.plot, cfg.tags) == (0.5, 3, True, False, ["a"])
    assert isinstance(cfg.steps, int) and isinstance(cfg.optim.lr, float)


def test_bad_values_are_refused_by_the_parser():
    with pytest.raises(SystemExit):
        parse([])  # --instances is required
    with pytest.raises(SystemExit):
        parse(["--instances", "d", "--optimizer", "sgd"])
    with pytest.raises(SystemExit):
        parse(["--instances", "d", "--steps", "0"])


def test_to_argv_round_trips():
    cfg = Config(instances="d", steps=7, tags=["x", "y"], optim=Optim(lr=0.25, optimizer="adamw"))
    cfg.run = Run(compile=True, plot=False, nan_steps=(1, 2))
    argv = to_argv(cfg)
    assert "--tags" in argv and "--no-plot" in argv and "--compile" in argv
    assert parse(argv) == cfg
    assert to_argv(Config(instances="d")) == ["--instances", "d"]  # defaults are left out
    assert "--steps" not in to_argv(cfg, skip=("steps",))


def test_flat_run_options_and_flags():
    cfg = Config(instances="d")
    assert flat(cfg)["lr"] == 1e-3 and flat(cfg)["nan_steps"] == [] and "optim" not in flat(cfg)
    assert run_options(Config) == {"compile", "plot"}
    assert {"--config", "--warmup-steps", "--no-plot"} - option_flags(Config) == {"--no-plot"}


def test_an_option_defined_twice_is_refused():
    @dataclass
    class Twice:
        lr: float = opt(1.0, "x")
        optim: Optim = section(Optim)

    with pytest.raises(TypeError, match="defined twice"):
        add_arguments(argparse.ArgumentParser(), Twice)


@dataclass
class Cleaning:
    min_chars: int = opt(50, "shortest document [%(default)s]")
    split_cjk: bool = opt(True, "learn multi-character pieces", flag="--no-split-cjk")


@dataclass(kw_only=True)
class Command:
    text: list[str] = opt(help="text files", repeat=True, exclusive="input")
    corpus: str | None = opt(None, "corpus folder", exclusive="input")
    out: str = opt(help="output folder")
    cleaning: Cleaning = section(Cleaning, title="cleaning options")


def test_exclusive_options_titled_sections_and_negative_switches():
    parser = argparse.ArgumentParser(prog="t")
    add_arguments(parser, Command)
    usage, text = parser.format_usage(), parser.format_help()
    assert "[--text TEXT | --corpus CORPUS]" in usage and "--split-cjk" not in text.replace("--no-split", "")
    assert "cleaning options:" in text and "shortest document [50]" in text
    with pytest.raises(SystemExit):
        parser.parse_args(["--out", "o", "--text", "a", "--corpus", "c"])
    cfg = from_args(Command, parser.parse_args(["--out", "o", "--no-split-cjk", "--min-chars", "3"]))
    assert cfg == Command(out="o", cleaning=Cleaning(min_chars=3, split_cjk=False)) and cfg.text == []
    assert to_argv(cfg) == ["--out", "o", "--min-chars", "3", "--no-split-cjk"]
    assert from_args(Command, parser.parse_args(to_argv(cfg))) == cfg

"""A stage's options, defined once: a dataclass whose fields carry their help, and the argparse
parser, the parsed config and the argv are all generated from it.

    @dataclass
    class OptimConfig:
        lr: float = opt(1.76e-3, "peak learning rate")
        optimizer: str = opt("lamb", "update rule", choices=("lamb", "adamw"))

    @dataclass
    class TrainConfig:
        instances: str = opt(help="instance folder")          # no default: a required option
        optim: OptimConfig = section(OptimConfig)              # a section: its fields are flat flags

    add_arguments(parser, TrainConfig)      # --instances, --lr, --optimizer
    cfg = from_args(TrainConfig, parser.parse_args(argv))
    to_argv(cfg)                            # the flags that rebuild cfg (what torchrun is given)

Flags are the field names with dashes (`warmup_steps` -> `--warmup-steps`) unless `flag=` says
otherwise; a name must be unique over all sections, because the command line is flat. A `bool`
that defaults to False is a switch (`--compile`); one that defaults to True gets `--no-...` (with
`flag="--no-x"` only that switch exists). A field with `repeat=True` is a list that the flag appends
to. Options that share an `exclusive` name are mutually exclusive, and a section with a `title` is
an argument group of its own in `--help`. Metadata `run=True` marks options that may change between
a run and its resumption (they do not name the run).
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Callable, Iterator
from typing import Any

_MISSING = dataclasses.MISSING


def opt(
    default: Any = _MISSING,
    help: str = "",  # noqa: A002 - argparse's own word
    *,
    flag: str | None = None,
    choices: tuple | None = None,
    parse: Callable[[str], Any] | None = None,
    metavar: str | None = None,
    run: bool = False,
    hidden: bool = False,
    repeat: bool = False,
    exclusive: str | None = None,
    default_factory: Callable[[], Any] | Any = _MISSING,
) -> Any:
    """A dataclass field with what its command-line option needs. No default: a required option."""
    meta = {
        "help": help,
        "flag": flag,
        "choices": choices,
        "parse": parse,
        "metavar": metavar,
        "run": run,
        "hidden": hidden,
        "repeat": repeat,
        "exclusive": exclusive,
    }
    if repeat and default_factory is _MISSING:  # a list default would be shared between instances
        default_factory = list if default is _MISSING else (lambda: default)
    if default_factory is not _MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def section(cls: type, title: str | None = None) -> Any:
    """A nested config section, built from its own defaults (`title`: its group in `--help`)."""
    return dataclasses.field(default_factory=cls, metadata={"section": True, "title": title})


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _is_section(f: dataclasses.Field) -> bool:
    return bool(f.metadata.get("section"))


def leaves(cls: type) -> Iterator[tuple[dataclasses.Field, Any]]:
    """(field, type) of every option of cls, sections flattened, in definition order."""
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        if _is_section(f):
            yield from leaves(hints[f.name])
        elif "help" in f.metadata:
            yield f, hints[f.name]


def flag_of(f: dataclasses.Field) -> str:
    return f.metadata.get("flag") or "--" + f.name.replace("_", "-")


def _scalar(tp: Any) -> Any:
    """int for `int`, `int | None`, `tuple[int, ...]`; None where argparse keeps the string."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return _scalar(args[0]) if len(args) == 1 else None
    if origin in (list, tuple):
        return _scalar(typing.get_args(tp)[0])
    return tp if tp in (int, float) else None


def _default(f: dataclasses.Field) -> Any:
    if f.default is not _MISSING:
        return f.default
    if f.default_factory is not _MISSING:
        return f.default_factory()
    return _MISSING


def add_arguments(parser: argparse.ArgumentParser, cls: type) -> None:
    """One option per field of cls (and of its sections)."""
    _add_arguments(parser, cls, cls.__name__, set(), {})


def _negative(f: dataclasses.Field, default: Any) -> bool:
    """A bool option that only exists as its `--no-x` switch."""
    return default is True and flag_of(f).startswith("--no-")


def _add_arguments(parser: Any, cls: type, owner: str, seen: set[str], exclusive: dict[str, Any]) -> None:
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        if _is_section(f):
            title = f.metadata.get("title")
            group = parser.add_argument_group(title) if title else parser
            _add_arguments(group, hints[f.name], owner, seen, exclusive)
            continue
        if "help" not in f.metadata:
            continue
        if f.name in seen:
            raise TypeError(f"{owner}: option {f.name!r} is defined twice")
        seen.add(f.name)
        tp, m, default = hints[f.name], f.metadata, _default(f)
        target = parser
        if m["exclusive"]:
            if m["exclusive"] not in exclusive:
                exclusive[m["exclusive"]] = parser.add_mutually_exclusive_group()
            target = exclusive[m["exclusive"]]
        help_ = argparse.SUPPRESS if m["hidden"] else m["help"]
        kwargs: dict[str, Any] = {"dest": f.name, "help": help_}
        if tp is bool:
            if _negative(f, default):
                kwargs["action"] = "store_false"
            else:
                kwargs["action"] = argparse.BooleanOptionalAction if default is True else "store_true"
            kwargs["default"] = bool(default)
            target.add_argument(flag_of(f), **kwargs)
            continue
        kwargs["type"] = m["parse"] or _scalar(tp)
        if m["choices"]:
            kwargs["choices"] = m["choices"]
        if m["metavar"]:
            kwargs["metavar"] = m["metavar"]
        if default is _MISSING:
            kwargs["required"] = True
        else:
            kwargs["default"] = list(default) if m["repeat"] else default
        if m["repeat"]:
            kwargs["action"] = "append"
        target.add_argument(
            flag_of(f), **{k: v for k, v in kwargs.items() if v is not None or k == "default"}
        )


def from_args(cls: type, args: argparse.Namespace | dict) -> Any:
    """The config that parsed args describe (a dict of field values works too)."""
    values = vars(args) if isinstance(args, argparse.Namespace) else args
    hints = _hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if _is_section(f):
            kwargs[f.name] = from_args(hints[f.name], values)
        elif "help" in f.metadata and f.name in values:
            value = values[f.name]
            if typing.get_origin(hints[f.name]) is tuple and value is not None:
                value = tuple(value)
            kwargs[f.name] = value
    return cls(**kwargs)


def flat(cfg: Any) -> dict[str, Any]:
    """{option name: value} over all sections (what trainer.json and stage keys record)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if _is_section(f):
            out.update(flat(value))
        elif "help" in f.metadata:
            out[f.name] = list(value) if isinstance(value, tuple) else value
    return out


def to_argv(cfg: Any, skip: tuple[str, ...] = ()) -> list[str]:
    """The flags that rebuild cfg through add_arguments/from_args (options at their default and
    None values are left out; `skip` names options to leave out too)."""
    argv: list[str] = []
    for f, tp in leaves(type(cfg)):
        if f.name in skip:
            continue
        value, default = _get(cfg, f.name), _default(f)
        if value is None or (default is not _MISSING and _same(value, default)):
            continue
        flag = flag_of(f)
        if tp is bool:
            argv.append(flag if value or _negative(f, default) else "--no-" + flag[2:])
        elif f.metadata["repeat"]:
            for item in value:
                argv += [flag, str(item)]
        elif isinstance(value, (list, tuple)):
            argv += [flag, ",".join(str(v) for v in value)]
        else:
            argv += [flag, str(value)]
    return argv


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return list(a) == list(b)
    return type(a) is type(b) and a == b


def _get(cfg: Any, name: str) -> Any:
    """A leaf option's value, wherever its section is."""
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if _is_section(f):
            found = _get(value, name)
            if found is not _MISSING:
                return found
        elif f.name == name:
            return value
    return _MISSING


def run_options(cls: type) -> set[str]:
    """Names of the options marked run=True (they may change when a run resumes)."""
    return {f.name for f, _ in leaves(cls) if f.metadata.get("run")}


def option_flags(cls: type) -> set[str]:
    return {flag_of(f) for f, _ in leaves(cls)}

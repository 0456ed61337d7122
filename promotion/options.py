"""The options of `albert promote`, defined once (core.config_cli generates the parser from them), and
the decisions that need nothing but them: which action the command line asks for, and the gate it
configures (GateConfig validates the gate's numbers; nothing here repeats its checks).

The promote flow's parameters are named as these fields, so one options object describes a promotion
for both callers. An error names an option as its caller's user spells it: the flow's parameter
(`parameter`, for deployments) or the command's flag (`flag`: `model_name` -> `--model`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from core import config_cli
from core.config_cli import opt
from core.errors import UserError
from promotion.gate import GateConfig, GateNumberError
from promotion.registry import DEFAULT_MODEL

Name = Callable[[str], str]
"""How a caller's user spells an option, given its field name."""


@dataclass(kw_only=True)
class PromoteOptions:
    candidate: str | None = opt(None, "checkpoint folder (config.json, model.safetensors, spm.model)")
    registry: str = opt(help="registry root (local folder, gs://bucket/prefix, s3://...)")
    model_name: str = opt(
        DEFAULT_MODEL, f"model name in the registry [{DEFAULT_MODEL}]", flag="--model", metavar="MODEL"
    )
    rollback: bool = opt(False, "restore the previous production version")
    set_production: str | None = opt(
        None,
        "point production at this registered version (checked first); repairs a damaged production.json",
        metavar="VERSION",
    )
    reason: str = opt("", "why (recorded in promotions.jsonl)")
    instances_dir: str | None = opt(
        None,
        "frozen eval set (default: the instances the candidate was trained on)",
        flag="--instances",
        metavar="INSTANCES",
    )
    spm_model: str | None = opt(None, "spm.model to register when the candidate folder has none")
    min_improvement: float = opt(
        GateConfig.min_improvement,
        "δ: the held-out MLM loss must improve by significantly more than this (nats)",
    )
    max_regression: float = opt(
        GateConfig.max_regression,
        "ε: tolerated drop of SOP accuracy and of each downstream metric, accuracy or entity F1 (a drop "
        "significantly larger rejects)",
    )
    alpha: float = opt(GateConfig.alpha, "significance level of the gate's tests")
    allow_below_scratch: bool = opt(
        GateConfig.allow_below_scratch,
        "promote a candidate significantly worse than the model from scratch on a downstream task "
        "(the decision then says so); default: refused",
    )
    max_batches: int | None = opt(None, "evaluate on this many batches only")

    def action(self) -> str:
        """ "promote", "rollback" or "set-production"; a combination that means nothing is one line."""
        if self.rollback and self.set_production:
            raise UserError("give --rollback or --set-production VERSION, not both")
        if self.rollback or self.set_production:
            action = "rollback" if self.rollback else "set-production"
            if self.candidate:
                raise UserError(f"--{action} takes no --candidate")
            return action
        if not self.candidate:
            raise UserError("give --candidate DIR (or --rollback, or --set-production VERSION)")
        return "promote"

    def gate(self, name: Name) -> GateConfig:
        """The gate these options configure, checked by GateConfig; its error names the option."""
        try:
            return GateConfig(
                min_improvement=self.min_improvement,
                max_regression=self.max_regression,
                alpha=self.alpha,
                allow_below_scratch=self.allow_below_scratch,
            )
        except GateNumberError as err:
            raise err.named(name(err.field_name)) from None

    def check_max_batches(self, name: Name) -> None:
        if self.max_batches is not None and not (isinstance(self.max_batches, int) and self.max_batches >= 1):
            raise UserError(f"{name('max_batches')} must be at least 1, got {self.max_batches}")


def parameter(field_name: str) -> str:
    """An option as the promote flow's caller names it: its parameter, the field's own name."""
    return field_name


_FIELDS = {f.name: f for f in dataclasses.fields(PromoteOptions)}


def flag(field_name: str) -> str:
    """An option as the command's user types it: its flag (`model_name` -> `--model`)."""
    return config_cli.flag_of(_FIELDS[field_name])

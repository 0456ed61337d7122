"""Flow `promote` and `albert promote`: gate a candidate checkpoint against production and move the
registry's production pointer. The logic is the promotion package's (gate, registry, acting on the
decision); this flow sequences it: check, evaluate both models, decide, register, report.

    albert promote --candidate DIR --registry DIR [--instances DIR] [--model albert]
                   [--min-improvement 0.01] [--max-regression 0.02] [--allow-below-scratch]
    albert promote --registry DIR --rollback [--model albert]
    albert promote --registry DIR --set-production vN [--model albert]

The eval set is frozen: the instances folder given (or the one the candidate was trained on, from its
run's manifest or train_config.json), evaluated for the candidate AND the current production model in
this run, with the same code. The production pointer read before the evaluations is the
compare-and-swap base: if another promotion lands meanwhile, this one is recorded as a conflict and
changes nothing.

Every check that needs no evaluation (flows/promote_checks.py) runs once: the command runs it before
Prefect starts, with the command's flags, and hands what it checked to the flow it then runs in this
process; a deployment's run checks inside the flow, with the flow's parameter names.
"""

from __future__ import annotations

import argparse
import contextvars
import dataclasses
import inspect
import json
from dataclasses import dataclass
from typing import Any

from prefect.artifacts import create_markdown_artifact, create_table_artifact

from core import config_cli, lock, storage
from core.manifest import MANIFEST
from flows.evaluate import (
    baseline_cache_dir,
    eval_json_path,
    eval_metrics_description,
    eval_metrics_rows,
    eval_samples,
    evaluate_checkpoint,
    gate_metrics,
    metrics_table,
)
from flows.params import Downstream, or_default
from flows.prefect_run import flow_run_id, logger, stage_flow
from flows.promote_checks import Checked, check_inputs, open_registry
from flows.run_names import leaf
from flows.stage import DEFAULT_ROOT
from promotion.decontamination import coverage, task_of
from promotion.degenerate import sop_constant, sop_constant_warning
from promotion.downstream import (
    downstream_baselines,
    downstream_description,
    downstream_pairs,
    downstream_rows,
    scratch_samples,
    with_downstream,
)
from promotion.gate import GateConfig, decide
from promotion.gate_report import promotion_markdown, promotion_title
from promotion.lineage import candidate_lineage
from promotion.options import PromoteOptions, flag
from promotion.promote import gate_and_promote
from promotion.registry import DEFAULT_MODEL
from promotion.samples import Baselines, EvalSample

DEFAULT_REGISTRY = f"{DEFAULT_ROOT}/registry"

# What `albert promote` checked before it started the flow (None when a deployment runs the flow).
_CHECKED_BY_THE_COMMAND: contextvars.ContextVar[Checked | None] = contextvars.ContextVar(
    "promote_checked_by_the_command", default=None
)


@dataclass
class Evaluation:
    """One model on the frozen eval set: its metrics, its per-sequence sample, and the baselines'; the
    `albert evaluate` report they come from (the artifacts show its intervals)."""

    metrics: dict
    baselines: dict
    sample: EvalSample
    baseline_sample: Baselines
    weights_sha256: str
    report: dict


def evaluate_afresh(
    checkpoint: str, checked: Checked, storage_root: str, max_batches: int | None
) -> Evaluation:
    """Evaluate in this run, never from Prefect's cache: candidate and production side by side."""
    out, weights = eval_json_path(storage_root, checkpoint, checked.instances_dir)
    report = evaluate_checkpoint.with_options(refresh_cache=True)(
        checkpoint, weights, checked.instances_dir, out, max_batches, baseline_cache_dir(storage_root)
    )
    metrics, baselines = gate_metrics(report, checkpoint)
    return Evaluation(metrics, baselines, *eval_samples(report), weights, report)


def corpus_manifest(corpus_dir: str | None) -> dict | None:
    """The manifest of the candidate's corpus, when its lineage names one that has it."""
    if not corpus_dir:
        return None
    path = storage.join(corpus_dir, MANIFEST)
    return storage.read_json(path) if storage.exists(path) else None


@stage_flow("promote")
@lock.scope()  # the registry's lock (open_registry) is held until the promotion ends
def promote(
    candidate: str,
    registry: str = DEFAULT_REGISTRY,
    model_name: str = DEFAULT_MODEL,
    instances_dir: or_default(str, "the candidate's", "an instances folder") = None,
    min_improvement: float = GateConfig.min_improvement,
    max_regression: float = GateConfig.max_regression,
    alpha: float = GateConfig.alpha,
    allow_below_scratch: bool = GateConfig.allow_below_scratch,
    downstream: Downstream = None,
    lineage: or_default(dict[str, Any], "no lineage") = None,
    spm_model: or_default(str, "lineage's vocab_dir", "a file") = None,
    max_batches: or_default(int, "all") = None,
) -> dict:
    """Evaluate candidate and production on the same eval set, gate (promotion/gate.py), register and
    promote.

    Args:
        candidate: the candidate: a checkpoint folder, or a run folder (its newest checkpoint).
        registry: the model registry's folder or gs:// URL.
        model_name: the model's name in the registry.
        instances_dir: the frozen eval set (an instances folder); None: the one the candidate was
            trained on (from its run's manifest).
        min_improvement: δ, nats per masked prediction: promote only if the MLM loss improves on
            production by significantly more than δ (0: any real improvement).
        max_regression: ε: a secondary metric (SOP accuracy, each downstream task's) vetoes when its
            drop is significantly greater than ε (0: any real drop vetoes).
        alpha: significance level of the primary test, and family-wise level of the secondary ones.
        allow_below_scratch: promote a candidate that is significantly worse than the model from
            scratch on a downstream task (every other check passing); the decision then says so.
            False: such a candidate is not promoted.
        downstream: flows.finetune.downstream_tasks's results (one dict per task; a single dict is
            one task): the gate guards each task's metric against production (when it was fine-tuned
            too) and against the model from scratch tuned by the same search, paired on the same test
            examples and seeds. None: no downstream check.
        lineage: stage folders etc. for the version's lineage.json (repretrain fills it in).
        spm_model: the vocabulary the candidate was trained with, for a checkpoint that holds no
            spm.model; None: lineage's vocab_dir's.
        max_batches: evaluate only this many eval batches per model; None: the whole eval split.

    Returns:
        The PromotionResult as a dict, plus the metrics table.
    """
    lineage = dict(lineage or {})
    if spm_model is None and lineage.get("vocab_dir"):
        spm_model = storage.join(lineage["vocab_dir"], "spm.model")
    checked = _CHECKED_BY_THE_COMMAND.get() or check_inputs(  # messages name this flow's parameters
        PromoteOptions(
            candidate=candidate,
            registry=registry,
            model_name=model_name,
            instances_dir=instances_dir,
            spm_model=spm_model,
            min_improvement=min_improvement,
            max_regression=max_regression,
            alpha=alpha,
            allow_below_scratch=allow_below_scratch,
            max_batches=max_batches,
        )
    )
    storage_root = storage.dirname(storage.absolute(registry))
    cand = evaluate_afresh(checked.candidate, checked, storage_root, max_batches)
    production_dir = checked.production and checked.registry.url(checked.production)
    prod = evaluate_afresh(production_dir, checked, storage_root, max_batches) if production_dir else None
    pairs = downstream_pairs(downstream)
    decision = decide(
        cand.sample,
        prod.sample if prod else None,
        checked.gate,
        cand.baseline_sample,
        pairs,
        decontaminated=coverage(
            sorted({t for t in map(task_of, pairs) if t}), corpus_manifest(lineage.get("corpus_dir"))
        ),
        scratch=scratch_samples(downstream),
    )
    cand_metrics, prod_metrics = with_downstream(cand.metrics, prod.metrics if prod else None, downstream)
    result = gate_and_promote(
        checked.registry,
        checked.candidate,
        cand_metrics,
        prod_metrics if prod else cand.baselines,  # what the candidate faced, for the log
        checked.snapshot,
        decision,
        candidate_lineage(
            lineage,
            candidate=checked.candidate,
            instances_dir=checked.instances_dir,
            parent_version=checked.production,
            flow_run_id=flow_run_id(),
        ),
        checked.spm_model,
        expected_sha256={"model.safetensors": cand.weights_sha256},  # what was evaluated is registered
    ).to_dict()
    columns = {"candidate": cand_metrics}
    if prod:
        columns[f"production {checked.production}"] = prod_metrics
    result.update(
        flow_run_id=flow_run_id(),  # the run summary links to this run's promotion-decision
        candidate=checked.candidate,
        model=model_name,
        table=metrics_table(columns, {**cand.baselines, **downstream_baselines(downstream)}),
        baselines=cand.baselines,
        candidate_metrics=cand_metrics,
        production_metrics=prod_metrics,
    )
    _report(result, checked, cand, prod, downstream)
    return result


def _report(
    result: dict, checked: Checked, cand: Evaluation, prod: Evaluation | None, downstream: Any
) -> None:
    """The `eval-metrics` table (and `eval-downstream` when tasks were fine-tuned), the
    `promotion-decision` markdown and a log line. The tables show the evaluations of this run (the
    whole eval split unless max_batches), the figures the gate decided on."""
    reports = {"candidate": cand.report}
    compared = "The candidate, evaluated in this run, against the trivial baselines (no production model yet)"
    if prod:
        reports[f"production {checked.production}"] = prod.report
        compared = (
            f"The candidate and production {checked.production}, both evaluated in this run, against each "
            "other and the trivial baselines"
        )
    constant = sop_constant(cand.sample, cand.baseline_sample)
    create_table_artifact(
        table=eval_metrics_rows(reports, cand.baselines["mlm_loss"].get("uniform")),
        key="eval-metrics",
        description=eval_metrics_description(reports, compared)
        + (f" The candidate: {sop_constant_warning(constant)}." if constant else "")
        + (" Downstream tasks: the eval-downstream table." if downstream else ""),
    )
    if downstream:
        create_table_artifact(
            table=downstream_rows(downstream, checked.production),
            key="eval-downstream",
            description=downstream_description(downstream),
        )
    create_markdown_artifact(
        markdown=promotion_markdown(result, result["model"], checked.registry.url()),
        key="promotion-decision",
        # The checkpoint's folder name only: a full path (gs://...) is too wide for the artifact's header.
        description=f"{promotion_title(result)}: the candidate {leaf(checked.candidate)}",
    )
    logger().info("promotion: %s (%s)", result["event"], "; ".join(result["decision"]["reasons"]))


@stage_flow("rollback")
@lock.scope()
def rollback(registry: str = DEFAULT_REGISTRY, model_name: str = DEFAULT_MODEL, reason: str = "") -> dict:
    """Restore the previous production version (refused when it is no longer complete).

    Args:
        registry: the model registry's folder or gs:// URL.
        model_name: the model's name in the registry.
        reason: why, recorded in the registry's history.
    """
    reg = open_registry(registry, model_name)
    pointer = reg.rollback(reason, flow_run_id())
    create_markdown_artifact(
        markdown=f"# Rollback: production is {pointer['version']} again\n\n"
        f"- registry: `{reg.url()}`, model `{model_name}`\n"
        f"- production was {pointer['rolled_back_from']}\n- reason: {reason or 'not given'}",
        key="promotion-decision",
        description=f"rollback to {pointer['version']}",
    )
    return pointer


# ----------------------------------------------------------------------------------------------- CLI


def add_arguments(p: argparse.ArgumentParser) -> None:
    config_cli.add_arguments(p, PromoteOptions)


def flow_parameters(options: PromoteOptions) -> dict:
    """The promote flow's parameters that the options set (they share their names)."""
    accepted = inspect.signature(promote.fn).parameters
    return {k: v for k, v in dataclasses.asdict(options).items() if k in accepted}


def run(args: argparse.Namespace) -> int:
    options = config_cli.from_args(PromoteOptions, args)
    action = options.action()
    if action != "promote":
        reg = open_registry(options.registry, options.model_name, flag)
        if action == "rollback":
            pointer = reg.rollback(options.reason)
            was = pointer["rolled_back_from"]
            print(f"{options.model_name}: production is {pointer['version']} again (was {was})")
        else:
            pointer = reg.restore(options.set_production, options.reason)
            was = pointer.get("set_from")
            print(
                f"{options.model_name}: production is {pointer['version']}" + (f" (was {was})" if was else "")
            )
        return 0
    # Before Prefect starts: a bad argument is one line and no flow run.
    handed = _CHECKED_BY_THE_COMMAND.set(check_inputs(options, flag))
    try:
        result = promote(**flow_parameters(options))
    finally:
        _CHECKED_BY_THE_COMMAND.reset(handed)
    print(json.dumps({k: result[k] for k in ("event", "version", "production", "previous")}))
    warnings = set(result["decision"].get("warnings") or [])
    for reason in result["decision"]["reasons"]:
        print(("  WARNING: " if reason in warnings else "  ") + reason)
    return 0 if result["event"] == "promote" else 1


if __name__ == "__main__":
    import sys

    from flows.cli import main

    sys.exit(main(["promote", *sys.argv[1:]]))

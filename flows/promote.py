"""Flow `promote` and `albert promote`: gate a candidate checkpoint against production and move the
registry's production pointer (flows/registry.py holds the logic; this file evaluates and reports).

    albert promote --candidate DIR --registry DIR [--instances DIR] [--model albert]
                   [--min-improvement 0.01] [--max-regression 0.02]
    albert promote --registry DIR --rollback [--model albert]

The eval set is frozen: the instances folder given (or the one the candidate was trained on, from its
run's manifest), evaluated for the candidate AND the current production model in this run, with the
same code. The production pointer read before the evaluations is the compare-and-swap base: if another
promotion lands meanwhile, this one is recorded as a conflict and changes nothing.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from prefect.artifacts import create_markdown_artifact, create_table_artifact

from flows.common import (
    flow_run_id,
    logger,
    stage_flow,
)
from flows.evaluate import eval_json_path, eval_samples, evaluate_checkpoint, gate_metrics, metrics_table
from flows.gate import GateConfig, decide, decision_table_markdown
from flows.registry import DEFAULT_MODEL, Registry, build_lineage, gate_and_promote
from model.samples import DownstreamSample
from pipelines import storage
from pipelines.errors import UserError

DEFAULT_REGISTRY = "out/factory/registry"


def candidate_instances(candidate: str) -> str | None:
    """The instances folder a candidate was trained on, from the run manifest next to its checkpoints
    (`<run>/checkpoints/step-N/` -> `<run>/manifest.json`), when there is one."""
    d = storage.absolute(candidate).rstrip("/")
    for _ in range(3):
        path = storage.join(d, "manifest.json")
        if storage.exists(path):
            m = storage.read_json(path)
            inst = m.get("instances") or (m.get("inputs") or {}).get("instances")
            if isinstance(inst, dict):
                inst = inst.get("path") or inst.get("dir")
            if inst:
                return inst
        d = storage.dirname(d)
    return None


def decision_markdown(result: dict, model: str, registry: str) -> str:
    verdict = {
        "promote": f"PROMOTED as **{result['version']}**",
        "reject": "REJECTED",
        "conflict": f"NOT PROMOTED (conflict): registered as {result['version']}, production is {result['production']}",
    }[result["event"]]
    lines = [
        f"# Promotion of `{result.get('candidate', '')}`: {verdict}",
        "",
        f"Registry `{registry}`, model `{model}`; compared against: "
        f"{result['previous'] or 'the trivial baselines (no production model yet)'}.",
        "",
        decision_table_markdown(result["decision"]),
        "",
        "Reasons:",
        "",
    ]
    lines += [f"- {r}" for r in result["decision"]["reasons"]]
    return "\n".join(lines)


def downstream_pairs(downstream: dict[str, Any] | None) -> list[tuple]:
    """(candidate, production) DownstreamSamples of a downstream_accuracy result, for the gate."""
    if not downstream:
        return []

    def sample(key: str):
        data = downstream.get(key)
        return DownstreamSample.from_json(data) if data else None

    return [(sample("candidate_sample"), sample("production_sample"))]


@stage_flow("promote")
def promote(
    candidate: str,
    registry: str = DEFAULT_REGISTRY,
    model_name: str = DEFAULT_MODEL,
    instances_dir: str | None = None,
    min_improvement: float = GateConfig.min_improvement,
    max_regression: float = GateConfig.max_regression,
    alpha: float = GateConfig.alpha,
    downstream: dict[str, Any] | None = None,
    lineage: dict | None = None,
    spm_model: str | None = None,
    max_batches: int | None = None,
) -> dict:
    """Evaluate candidate and production on the same eval set, gate (flows/gate.py), register and
    promote.

    downstream: flows.finetune.downstream_accuracy's result when a fine-tuning task ran for both (the
    gate then also guards downstream accuracy, paired on the same test examples). lineage: stage
    folders etc. for lineage.json. Returns the PromotionResult as a dict, plus the metrics table."""
    log = logger()
    gate = GateConfig(min_improvement=min_improvement, max_regression=max_regression, alpha=alpha)
    candidate = storage.absolute(candidate)
    instances_dir = instances_dir or candidate_instances(candidate)
    if not instances_dir:
        raise UserError(f"no eval set: pass instances_dir (the candidate {candidate} names none)")
    instances_dir = storage.absolute(instances_dir)
    reg = Registry(storage.absolute(registry), model_name)
    snapshot = reg.read_pointer()  # the CAS base: read BEFORE evaluating anything
    pointer = snapshot[0]
    storage_root = storage.dirname(storage.absolute(registry))

    # Both models, the same frozen eval set, this run: never a cached result (refresh_cache).
    fresh = evaluate_checkpoint.with_options(refresh_cache=True)
    out, weights = eval_json_path(storage_root, candidate, instances_dir)
    report = fresh(candidate, weights, instances_dir, out, max_batches)
    cand_metrics, baselines = gate_metrics(report, candidate)
    cand_sample, baseline_sample = eval_samples(report)
    prod_metrics = prod_sample = None
    if pointer:
        prod_dir = reg.url(pointer["version"])
        out, weights = eval_json_path(storage_root, prod_dir, instances_dir)
        report = fresh(prod_dir, weights, instances_dir, out, max_batches)
        prod_metrics, _ = gate_metrics(report, prod_dir)
        prod_sample, _ = eval_samples(report)
    decision = decide(cand_sample, prod_sample, gate, baseline_sample, downstream_pairs(downstream))
    if downstream:
        cand_metrics["downstream_accuracy"] = downstream.get("candidate")
        if prod_metrics is not None and downstream.get("production") is not None:
            prod_metrics["downstream_accuracy"] = downstream["production"]

    lineage = dict(lineage or {})
    full_lineage = build_lineage(
        checkpoint_dir=candidate,
        corpus_dir=lineage.get("corpus_dir"),
        vocab_dir=lineage.get("vocab_dir"),
        instances_dir=lineage.get("instances_dir", instances_dir),
        run_dir=lineage.get("run_dir"),
        flow_run_id=flow_run_id(),
        parent_version=lineage.get("parent_version", pointer["version"] if pointer else None),
        init_checkpoint=lineage.get("init_checkpoint"),
    )
    if spm_model is None and lineage.get("vocab_dir"):
        spm_model = storage.join(lineage["vocab_dir"], "spm.model")
    reference = prod_metrics if pointer else baselines
    result = gate_and_promote(
        reg, candidate, cand_metrics, reference, snapshot, decision, full_lineage, spm_model
    ).to_dict()
    result["candidate"], result["model"] = candidate, model_name
    columns = {"candidate": cand_metrics}
    if prod_metrics is not None:
        columns[f"production {pointer['version']}"] = prod_metrics
    result["table"] = metrics_table(columns, baselines)
    result["baselines"] = baselines
    result["candidate_metrics"], result["production_metrics"] = cand_metrics, prod_metrics
    create_table_artifact(
        table=result["table"],
        key="eval-metrics",
        description=f"candidate vs production on {instances_dir} (eval split), with the trivial baselines",
    )
    create_markdown_artifact(
        markdown=decision_markdown(result, model_name, reg.url()),
        key="promotion-decision",
        description=f"promotion decision for {candidate}",
    )
    log.info("promotion: %s (%s)", result["event"], "; ".join(result["decision"]["reasons"]))
    return result


@stage_flow("rollback")
def rollback(registry: str = DEFAULT_REGISTRY, model_name: str = DEFAULT_MODEL, reason: str = "") -> dict:
    """Restore the previous production version."""
    pointer = Registry(storage.absolute(registry), model_name).rollback(reason, flow_run_id())
    create_markdown_artifact(
        markdown=f"# Rollback of `{model_name}`\n\nproduction is **{pointer['version']}** again "
        f"(was {pointer['rolled_back_from']}). Reason: {reason or 'not given'}",
        key="promotion-decision",
        description="rollback",
    )
    return pointer


# ----------------------------------------------------------------------------------------------- CLI


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--candidate", help="checkpoint folder (config.json, model.safetensors, spm.model)")
    p.add_argument(
        "--registry", required=True, help="registry root (local folder, gs://bucket/prefix, s3://...)"
    )
    p.add_argument("--model", default=DEFAULT_MODEL, help=f"model name in the registry [{DEFAULT_MODEL}]")
    p.add_argument("--rollback", action="store_true", help="restore the previous production version")
    p.add_argument("--reason", default="", help="why (recorded in promotions.jsonl)")
    p.add_argument(
        "--instances", help="frozen eval set (default: the instances the candidate was trained on)"
    )
    p.add_argument("--spm-model", help="spm.model to register when the candidate folder has none")
    g = GateConfig()
    p.add_argument(
        "--min-improvement",
        type=float,
        default=g.min_improvement,
        help="δ: the held-out MLM loss must improve by significantly more than this (nats)",
    )
    p.add_argument(
        "--max-regression",
        type=float,
        default=g.max_regression,
        help="ε: tolerated drop of SOP/downstream accuracy (a drop significantly larger rejects)",
    )
    p.add_argument("--alpha", type=float, default=g.alpha, help="significance level of the gate's tests")
    p.add_argument("--max-batches", type=int, default=None, help="evaluate on this many batches only")


def run(args: argparse.Namespace) -> int:
    if args.rollback:
        if args.candidate:
            raise UserError("--rollback takes no --candidate")
        pointer = Registry(storage.absolute(args.registry), args.model).rollback(args.reason)
        print(f"{args.model}: production is {pointer['version']} again (was {pointer['rolled_back_from']})")
        return 0
    if not args.candidate:
        raise UserError("give --candidate DIR (or --rollback)")
    result = promote(
        candidate=args.candidate,
        registry=args.registry,
        model_name=args.model,
        instances_dir=args.instances,
        min_improvement=args.min_improvement,
        max_regression=args.max_regression,
        alpha=args.alpha,
        spm_model=args.spm_model,
        max_batches=args.max_batches,
    )
    print(json.dumps({k: result[k] for k in ("event", "version", "production", "previous")}))
    for reason in result["decision"]["reasons"]:
        print("  " + reason)
    return 0 if result["event"] == "promote" else 1


if __name__ == "__main__":
    import sys

    from flows.cli import main

    sys.exit(main(["promote", *sys.argv[1:]]))

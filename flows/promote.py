"""Flow `promote` and `albert promote`: gate a candidate checkpoint against production and move the
registry's production pointer (flows/registry.py holds the logic; this file evaluates and reports).

    albert promote --candidate DIR --registry DIR [--instances DIR] [--model albert]
                   [--min-improvement 0.01] [--max-regression 0.02]
    albert promote --registry DIR --rollback [--model albert]
    albert promote --registry DIR --set-production vN [--model albert]

The eval set is frozen: the instances folder given (or the one the candidate was trained on, from its
run's manifest or train_config.json), evaluated for the candidate AND the current production model in
this run, with the same code. The production pointer read before the evaluations is the
compare-and-swap base: if another promotion lands meanwhile, this one is recorded as a conflict and
changes nothing.

Every check that needs no evaluation (`check_inputs`: the numbers, the candidate checkpoint and its
checksums, the eval set and its manifest, the vocabulary the candidate, the eval set and production
share, the registry and its production version) runs first: in the CLI before Prefect starts, with the
CLI's option names, and again in the flow before it evaluates (deployments call the flow directly),
with its parameter names.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass
from typing import Any

from prefect.artifacts import create_markdown_artifact, create_table_artifact

from core import lock, storage
from core.errors import UserError
from flows.evaluate import (
    baseline_cache_dir,
    eval_json_path,
    eval_samples,
    evaluate_checkpoint,
    gate_metrics,
    metrics_table,
)
from flows.gate import GateConfig, decide
from flows.gate_report import decision_table_markdown
from flows.lineage import build_lineage
from flows.prefect_run import flow_run_id, logger, stage_flow
from flows.promotion import gate_and_promote
from flows.registry import DEFAULT_MODEL, MODEL_NAME, MODEL_NAME_RULE, Registry
from flows.stage import DEFAULT_ROOT
from model.samples import DownstreamSample

DEFAULT_REGISTRY = f"{DEFAULT_ROOT}/registry"


# How the CLI spells the flow's parameters: what the CLI shows must name options a user can type.
CLI_NAMES = {
    "candidate": "--candidate",
    "registry": "--registry",
    "model_name": "--model",
    "instances_dir": "--instances",
    "spm_model": "--spm-model",
    "min_improvement": "--min-improvement",
    "max_regression": "--max-regression",
    "alpha": "--alpha",
    "max_batches": "--max-batches",
}


def candidate_instances(candidate: str) -> str | None:
    """The instances folder a candidate was trained on, from its run folder above the checkpoints
    (`<run>/checkpoints/step-N/` -> `<run>/`): the run manifest (the pretrain flow) or
    train_config.json (`albert pretrain`), when there is one."""
    d = storage.absolute(candidate).rstrip("/")
    for _ in range(3):
        for name in ("manifest.json", "train_config.json"):
            path = storage.join(d, name)
            try:
                m = storage.read_json(path) if storage.isfile(path) else {}
            except ValueError:
                continue  # a damaged file names nothing; --instances remains
            inst = (
                (m.get("instances") or (m.get("inputs") or {}).get("instances"))
                if isinstance(m, dict)
                else None
            )
            if isinstance(inst, dict):
                inst = inst.get("path") or inst.get("dir")
            if isinstance(inst, str) and inst:
                return inst
        d = storage.dirname(d)
    return None


def _labels(names: dict[str, str] | None):
    return lambda key: (names or {}).get(key, key)


def open_registry(registry: str, model_name: str, names: dict[str, str] | None = None) -> Registry:
    """The registry, after checking the model name and that the root can hold a registry, locked."""
    n = _labels(names)
    if not isinstance(model_name, str) or not MODEL_NAME.fullmatch(model_name):
        raise UserError(f"{n('model_name')} {model_name!r}: {MODEL_NAME_RULE}")
    reg = Registry(storage.absolute(registry), model_name)
    reg.hold(n("registry"))  # locked until the caller's scope ends (the flow, the command)
    return reg


def _check_numbers(n, min_improvement, max_regression, alpha, max_batches) -> None:
    rules = (
        ("min_improvement", min_improvement, lambda x: x >= 0, ">= 0 (nats)"),
        ("max_regression", max_regression, lambda x: 0 <= x < 1, "in [0, 1)"),
        ("alpha", alpha, lambda x: 0 < x < 0.5, "in (0, 0.5)"),
    )
    for key, x, ok, rule in rules:
        if not (isinstance(x, int | float) and math.isfinite(x) and ok(x)):
            raise UserError(f"{n(key)} must be {rule}, got {x}")
    if max_batches is not None and not (isinstance(max_batches, int) and max_batches >= 1):
        raise UserError(f"{n('max_batches')} must be at least 1, got {max_batches}")


def _check_candidate(n, candidate: str, spm_model: str | None) -> tuple[str, str]:
    """(checkpoint folder, its spm.model): a complete checkpoint whose checksums verify."""
    from model.checkpoint import CHECKSUMS, resolve, verify

    path = storage.absolute(candidate)
    if storage.isfile(path):
        raise UserError(f"{n('candidate')} {candidate} is a file; give a checkpoint folder")
    if not storage.isdir(path):
        raise UserError(f"{n('candidate')} {candidate}: no such checkpoint folder")
    try:
        path = resolve(path)  # a run folder -> its newest checkpoint that verifies
        if storage.exists(storage.join(path, CHECKSUMS)):
            verify(path)  # names the file that fails its checksum
    except UserError as err:
        raise UserError(f"{n('candidate')} {err}") from None
    for name in ("config.json", "model.safetensors"):
        if not storage.isfile(storage.join(path, name)):
            raise UserError(f"{n('candidate')} {path} is not a complete checkpoint: {name} is missing")
    try:
        storage.read_json(storage.join(path, "config.json"))
    except ValueError as err:
        raise UserError(f"{n('candidate')} {path}: config.json is not valid JSON ({err})") from None
    spm = storage.join(path, "spm.model")
    if storage.isfile(spm):
        return path, spm
    if not spm_model:
        raise UserError(
            f"{n('candidate')} {path} has no spm.model: pass {n('spm_model')} (the vocabulary it was trained with)"
        )
    if not storage.isfile(spm_model):
        raise UserError(f"{n('spm_model')} {spm_model}: no such file")
    return path, storage.absolute(spm_model)


@dataclass
class Checked:
    """What `check_inputs` resolved: absolute paths, the registry and its pointer (the CAS base)."""

    candidate: str
    instances_dir: str
    spm_model: str
    registry: Registry
    snapshot: tuple[dict | None, Any]


def check_inputs(
    candidate: str,
    registry: str,
    model_name: str,
    instances_dir: str | None,
    spm_model: str | None,
    min_improvement: float,
    max_regression: float,
    alpha: float,
    max_batches: int | None,
    names: dict[str, str] | None = None,
) -> Checked:
    """Everything a promotion can check without evaluating, one UserError line at the first problem.
    `names` maps the flow's parameter names to how the caller's user spells them (CLI_NAMES)."""
    from model.data import check_vocab, find_instances

    n = _labels(names)
    _check_numbers(n, min_improvement, max_regression, alpha, max_batches)
    reg = open_registry(registry, model_name, names)
    candidate, spm = _check_candidate(n, candidate, spm_model)

    given = instances_dir
    instances_dir = instances_dir or candidate_instances(candidate)
    if not instances_dir:
        raise UserError(f"no eval set: pass {n('instances_dir')} (the candidate {candidate} names none)")
    instances_dir = storage.absolute(instances_dir)
    if given:
        what, hint = f"{n('instances_dir')} {instances_dir}", ""
    else:
        what, hint = f"the eval set {instances_dir} of the candidate's run", f"; pass {n('instances_dir')}"
    if not storage.isdir(instances_dir):
        raise UserError(f"{what}: no such instances folder{hint}")
    if not storage.isfile(storage.join(instances_dir, "manifest.json")):
        raise UserError(f"{what} has no manifest.json: not a finished `albert instances` output{hint}")
    data = find_instances(instances_dir, "eval")
    check_vocab(data, spm, f"{n('candidate')}'s spm.model")

    snapshot = reg.read_pointer()  # a damaged production.json: one line saying how to repair it
    pointer = snapshot[0]
    if pointer:
        lineage = reg.check_production(pointer)  # missing, pruned or damaged: refused, with the repair
        digest = lineage["files"]["spm.model"]  # just verified against the file
        if data.vocab_sha256 and digest != data.vocab_sha256:
            prod_spm = reg.url(pointer["version"], "spm.model")
            raise UserError(
                f"production {pointer['version']} of {model_name} has another vocabulary ({prod_spm}, sha256 "
                f"{digest[:12]}) than the eval set {instances_dir} (sha256 {data.vocab_sha256[:12]}): the gate "
                f"compares both models on the same instances; train the candidate on production's "
                f"vocabulary, or register a model of a new vocabulary under another {n('model_name')}"
            )
    return Checked(candidate, instances_dir, spm, reg, snapshot)


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
@lock.scope()  # the registry's lock (open_registry) is held until the promotion ends
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
    lineage = dict(lineage or {})
    if spm_model is None and lineage.get("vocab_dir"):
        spm_model = storage.join(lineage["vocab_dir"], "spm.model")
    checked = check_inputs(  # before evaluating anything; messages name this flow's parameters
        candidate,
        registry,
        model_name,
        instances_dir,
        spm_model,
        min_improvement,
        max_regression,
        alpha,
        max_batches,
    )
    gate = GateConfig(min_improvement=min_improvement, max_regression=max_regression, alpha=alpha)
    candidate, instances_dir, reg = checked.candidate, checked.instances_dir, checked.registry
    snapshot = checked.snapshot  # the CAS base: read BEFORE evaluating anything
    pointer = snapshot[0]
    storage_root = storage.dirname(storage.absolute(registry))

    # Both models, the same frozen eval set, this run: never a cached result (refresh_cache).
    fresh = evaluate_checkpoint.with_options(refresh_cache=True)
    cache = baseline_cache_dir(storage_root)  # train label counts: read once per train split
    out, cand_weights = eval_json_path(storage_root, candidate, instances_dir)
    report = fresh(candidate, cand_weights, instances_dir, out, max_batches, cache)
    cand_metrics, baselines = gate_metrics(report, candidate)
    cand_sample, baseline_sample = eval_samples(report)
    prod_metrics = prod_sample = None
    if pointer:
        prod_dir = reg.url(pointer["version"])
        out, weights = eval_json_path(storage_root, prod_dir, instances_dir)
        report = fresh(prod_dir, weights, instances_dir, out, max_batches, cache)
        prod_metrics, _ = gate_metrics(report, prod_dir)
        prod_sample, _ = eval_samples(report)
    decision = decide(cand_sample, prod_sample, gate, baseline_sample, downstream_pairs(downstream))
    if downstream:
        cand_metrics["downstream_accuracy"] = downstream.get("candidate")
        if prod_metrics is not None and downstream.get("production") is not None:
            prod_metrics["downstream_accuracy"] = downstream["production"]

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
    reference = prod_metrics if pointer else baselines
    result = gate_and_promote(
        reg,
        candidate,
        cand_metrics,
        reference,
        snapshot,
        decision,
        full_lineage,
        checked.spm_model,
        expected_sha256={"model.safetensors": cand_weights},  # what was evaluated is what is registered
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
@lock.scope()
def rollback(registry: str = DEFAULT_REGISTRY, model_name: str = DEFAULT_MODEL, reason: str = "") -> dict:
    """Restore the previous production version (refused when it is no longer complete)."""
    pointer = open_registry(registry, model_name).rollback(reason, flow_run_id())
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
    p.add_argument(
        "--set-production",
        metavar="VERSION",
        help="point production at this registered version (checked first); repairs a damaged production.json",
    )
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
    if args.rollback or args.set_production:
        if args.rollback and args.set_production:
            raise UserError("give --rollback or --set-production VERSION, not both")
        if args.candidate:
            raise UserError(f"{'--rollback' if args.rollback else '--set-production'} takes no --candidate")
        reg = open_registry(args.registry, args.model, CLI_NAMES)
        if args.rollback:
            pointer = reg.rollback(args.reason)
            was = pointer["rolled_back_from"]
            print(f"{args.model}: production is {pointer['version']} again (was {was})")
        else:
            pointer = reg.restore(args.set_production, args.reason)
            was = pointer.get("set_from")
            print(f"{args.model}: production is {pointer['version']}" + (f" (was {was})" if was else ""))
        return 0
    if not args.candidate:
        raise UserError("give --candidate DIR (or --rollback, or --set-production VERSION)")
    params = dict(
        candidate=args.candidate,
        registry=args.registry,
        model_name=args.model,
        instances_dir=args.instances,
        spm_model=args.spm_model,
        min_improvement=args.min_improvement,
        max_regression=args.max_regression,
        alpha=args.alpha,
        max_batches=args.max_batches,
    )
    check_inputs(**params, names=CLI_NAMES)  # before Prefect starts: a bad argument is one line, no flow run
    result = promote(**params)
    print(json.dumps({k: result[k] for k in ("event", "version", "production", "previous")}))
    for reason in result["decision"]["reasons"]:
        print("  " + reason)
    return 0 if result["event"] == "promote" else 1


if __name__ == "__main__":
    import sys

    from flows.cli import main

    sys.exit(main(["promote", *sys.argv[1:]]))

"""Downstream fine-tuning for the gate and the demo (model/finetune.py through `albert finetune`).

`albert finetune` trains the checkpoint next to its baselines on the same split: the same architecture
from scratch, tuned by the same search (learning rate x warm-up chosen on dev, its training-set fit
checked), and linear models over character n-grams; the difference over scratch is the fine-tuning
lift, and the gate holds the candidate to it (promotion/gate_downstream.py). The
candidate's comparison is also a markdown artifact per task, `finetune-<task>`. For the gate, the
candidate and the production model are fine-tuned on the same task split with the same seeds; the
task run of one checkpoint is cached by Prefect (INPUTS + TASK_SOURCE: weights hash, task, options),
because it is deterministic and costs minutes. The from-scratch model's tuning does not depend on the
weights: it is kept under `<storage_root>/finetune/scratch/` and reused by every later candidate with
the same vocabulary, split and recipe (model/finetune_reuse.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prefect.cache_policies import INPUTS, TASK_SOURCE

from core import storage
from flows.keys import stage_key
from flows.prefect_run import logger, stage_task
from flows.stage import stage_dir
from flows.stage_options import stage_options
from promotion import units
from promotion.degenerate import downstream_degenerate

SCRATCH_FOLDER = "scratch"
"""`<storage_root>/finetune/scratch/`: the kept tunings of the from-scratch model, one file per task and
key (model/finetune_reuse.py), beside the stage folders of the fine-tuning reports."""

SEARCHED = ("pretrained", "scratch", "scratch_same_recipe")
"""The neural models of a fine-tuning report, each with the learning rate and warm-up it ran at."""

if TYPE_CHECKING:
    from model.finetune import FinetuneOptions


def run_finetune(opts: FinetuneOptions) -> dict:
    """model.finetune.run_finetune, imported when a fine-tuning runs: importing the flows stays free of
    torch (Prefect loads them to serve and deploy)."""
    from model.finetune import run_finetune as finetune

    return finetune(opts)


@stage_task(
    "finetune-checkpoint",
    task_run_name="finetune | {task_name}",  # what the parent run lists, per task
    backoff_factor=10,
    retries=1,
    cache_policy=(INPUTS - "checkpoint")
    + TASK_SOURCE,  # the weights hash, not the folder: a registry copy hits
    persist_result=True,
)
def finetune_checkpoint(
    checkpoint: str,
    weights_sha256: str,
    task_name: str,
    out_json: str,
    extra_args: list[str],
    scratch_cache: str | None = None,
) -> dict:
    """`albert finetune` in this process, extra_args over the flow's options; returns its JSON report.
    `scratch_cache`: where the from-scratch model's tuning is kept and reused (model/finetune_reuse.py)."""
    from model.finetune import FinetuneOptions

    options = stage_options(
        "finetune", FinetuneOptions, extra_args, checkpoint=checkpoint, task=task_name, out=out_json
    )
    if scratch_cache and not options.scratch_cache:  # extra_args may name another folder
        options.scratch_cache = scratch_cache
    run_finetune(options)
    return storage.read_json(out_json)


def _run(checkpoint: str, task_name: str, storage_root: str, extra_args: list[str]) -> dict:
    weights = storage.sha256(storage.join(checkpoint, "model.safetensors"))
    key = stage_key("finetune", weights=weights, task=task_name, args=list(extra_args))
    out = storage.join(stage_dir(storage_root, "finetune", key), "report.json")
    # The scratch model depends on the vocabulary and the recipe, not on the weights: every candidate
    # that keeps production's vocabulary (each run after the first) reuses the one tuned before it.
    scratch = storage.join(storage.absolute(storage_root), "finetune", SCRATCH_FOLDER)
    return finetune_checkpoint(checkpoint, weights, task_name, out, list(extra_args), scratch)


def downstream_task(
    candidate: str, production: str | None, task: str, storage_root: str, extra_args: list[str]
) -> dict:
    """One task's result for the gate and the summaries: {"task", "metric", "split", "seeds",
    "candidate", "scratch", "lift", "lift_ci95", "scratch_fits", "baselines", "ci95", "differences",
    "chosen", "searched", "degenerate", "production", "production_ci95", "candidate_sample",
    "production_sample", "scratch_sample"}. Values are the task's metric (accuracy, or entity F1 for
    NER) on its test split (dev when it has none), as the mean over the fine-tuning seeds: of the
    fine-tuned candidate, of the same model trained from scratch and tuned by the same search, and of
    the fine-tuned production model (the same seeds, the same split); whether the scratch model fit
    its training set; every other model's value ("baselines": name -> value); every model's 95%
    interval over seeds and examples ("ci95": name -> [lo, hi], the candidate's under "pretrained";
    "production_ci95"); the candidate minus each other model with its paired interval
    ("differences"); the learning rate and warm-up each neural model ran at ("chosen": name ->
    {"lr", "warmup_fraction"}, for pretrained, scratch, scratch_same_recipe) and how many settings
    each search tried on dev ("searched": name -> count); the models that predict one thing
    ("degenerate": name -> what, promotion/degenerate.py); and the per-(seed, example) scores
    (promotion.samples.DownstreamSample JSON) of the candidate, production and the model from
    scratch, which the gate pairs."""
    report = _run(candidate, task, storage_root, extra_args)
    split, metric = report["lift"]["split"], report.get("metric", "accuracy")
    models, per_example = report["models"], report.get("per_example") or {}
    baselines_artifact(report)
    out = {
        "task": task,
        "metric": metric,
        "split": split,
        "seeds": report.get("seeds"),
        "candidate": models["pretrained"][split][metric],
        "scratch": models["scratch"][split][metric],
        "lift": report["lift"][metric],
        "lift_ci95": report["lift"].get(f"{metric}_paired_ci95"),
        "scratch_fits": report["lift"].get("scratch_fits"),
        "baselines": {
            name: results[split][metric] for name, results in models.items() if name != "pretrained"
        },
        "ci95": {name: results[split].get(f"{metric}_ci95") for name, results in models.items()},
        "differences": report.get("differences", {}),
        "chosen": {
            name: {"lr": models[name]["lr"], "warmup_fraction": models[name].get("warmup_fraction")}
            for name in SEARCHED
            if "lr" in models.get(name, {})
        },
        "searched": {name: len(rows) for name, rows in (report.get("search") or {}).items()},
        "degenerate": downstream_degenerate(report),
        "production": None,
        "production_ci95": None,
        "candidate_sample": per_example.get("pretrained"),
        "production_sample": None,
        "scratch_sample": per_example.get("scratch"),
    }
    if production:
        production_report = _run(production, task, storage_root, extra_args)
        out["production"] = production_report["models"]["pretrained"][split][metric]
        out["production_ci95"] = production_report["models"]["pretrained"][split].get(f"{metric}_ci95")
        out["production_sample"] = (production_report.get("per_example") or {}).get("pretrained")
    logger().info(
        "downstream %s (%s %s, %d seed(s)): candidate %s, from scratch %s%s, production %s; baselines %s%s",
        task,
        split,
        metric,
        len(out["seeds"] or []),
        units.value(metric, out["candidate"]),
        units.value(metric, out["scratch"]),
        " (DID NOT FIT its training set)" if out["scratch_fits"] is False else "",
        "n/a" if out["production"] is None else units.value(metric, out["production"]),
        ", ".join(f"{name} {units.value(metric, value)}" for name, value in out["baselines"].items())
        or "none",
        "".join(f"; {name} {what}" for name, what in out["degenerate"].items()),
    )
    return out


def downstream_tasks(
    candidate: str, production: str | None, tasks: list[str], storage_root: str, extra_args: list[str]
) -> list[dict]:
    """downstream_task for each task, in order (the gate compares each). The fine-tuning commands
    report their place in the stage (one per task and model) and the stage's ETA; a command whose
    result Prefect's cache gives back counts as done at once."""
    from model.finetune_progress import stage

    results = []
    with stage(len(tasks) * (2 if production else 1)) as fine_tuning:
        for task in tasks:
            planned = fine_tuning.current + (2 if production else 1)
            results.append(downstream_task(candidate, production, task, storage_root, extra_args))
            while fine_tuning.current < planned:  # reused from the cache: no command ran
                fine_tuning.skip()
    return results


def baselines_artifact(report: dict) -> None:
    """The candidate's fine-tuning report as a markdown table in Prefect: every model on the same
    split, the paired differences, the from-scratch model's setting and fit (model_card's table)."""
    from prefect.artifacts import create_markdown_artifact

    from model.model_card import finetune_table

    title = f"# Fine-tuning: {report.get('task')}, {report['lift']['split']} split\n\n"
    create_markdown_artifact(
        markdown=title + "\n".join(finetune_table(report, narrow=True)),
        key=f"finetune-{report.get('task')}",
        description="the pretrained model next to its baselines",
    )

"""Downstream fine-tuning for the gate and the demo (model/finetune.py through `albert finetune`).

`albert finetune` trains the checkpoint next to its baselines on the same split: the same architecture
from scratch (its learning rate and warm-up chosen on dev, its training-set fit checked) and two
linear models over character n-grams; the difference over scratch is the fine-tuning lift. The
candidate's comparison is also a markdown artifact per task, `finetune-<task>`. For the gate, the
candidate and the production model are fine-tuned on the same task split with the same seeds; the
task run of one checkpoint is cached by Prefect (INPUTS + TASK_SOURCE: weights hash, task, options),
because it is deterministic and costs minutes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prefect.cache_policies import INPUTS, TASK_SOURCE

from core import storage
from flows.keys import stage_key
from flows.prefect_run import logger, stage_task
from flows.stage import stage_dir
from flows.stage_options import stage_options

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
    checkpoint: str, weights_sha256: str, task_name: str, out_json: str, extra_args: list[str]
) -> dict:
    """`albert finetune` in this process, extra_args over the flow's options; returns its JSON report."""
    from model.finetune import FinetuneOptions

    run_finetune(
        stage_options(
            "finetune", FinetuneOptions, extra_args, checkpoint=checkpoint, task=task_name, out=out_json
        )
    )
    return storage.read_json(out_json)


def _run(checkpoint: str, task_name: str, storage_root: str, extra_args: list[str]) -> dict:
    weights = storage.sha256(storage.join(checkpoint, "model.safetensors"))
    key = stage_key("finetune", weights=weights, task=task_name, args=list(extra_args))
    out = storage.join(stage_dir(storage_root, "finetune", key), "report.json")
    return finetune_checkpoint(checkpoint, weights, task_name, out, list(extra_args))


def downstream_task(
    candidate: str, production: str | None, task: str, storage_root: str, extra_args: list[str]
) -> dict:
    """One task's result for the gate and the summaries: {"task", "metric", "split", "seeds",
    "candidate", "scratch", "lift", "lift_ci95", "scratch_fits", "baselines", "ci95", "differences",
    "production", "production_ci95", "candidate_sample", "production_sample"}. Values are the task's
    metric (accuracy, or entity F1 for NER) on its test split (dev when it has none), as the mean over
    the fine-tuning seeds: of the fine-tuned candidate, of the same model trained from scratch, and of
    the fine-tuned production model (the same seeds, the same split); whether the scratch model fit
    its training set; every other model's value ("baselines": name -> value); every model's 95%
    interval over seeds and examples ("ci95": name -> [lo, hi], the candidate's under "pretrained";
    "production_ci95"); the candidate minus each other model with its paired interval
    ("differences"); and the candidate's and production's per-(seed, example) scores
    (promotion.samples.DownstreamSample JSON), which the gate pairs."""
    report = _run(candidate, task, storage_root, extra_args)
    split, metric = report["lift"]["split"], report.get("metric", "accuracy")
    baselines_artifact(report)
    out = {
        "task": task,
        "metric": metric,
        "split": split,
        "seeds": report.get("seeds"),
        "candidate": report["models"]["pretrained"][split][metric],
        "scratch": report["models"]["scratch"][split][metric],
        "lift": report["lift"][metric],
        "lift_ci95": report["lift"].get(f"{metric}_paired_ci95"),
        "scratch_fits": report["lift"].get("scratch_fits"),
        "baselines": {
            name: results[split][metric] for name, results in report["models"].items() if name != "pretrained"
        },
        "ci95": {name: results[split].get(f"{metric}_ci95") for name, results in report["models"].items()},
        "differences": report.get("differences", {}),
        "production": None,
        "production_ci95": None,
        "candidate_sample": (report.get("per_example") or {}).get("pretrained"),
        "production_sample": None,
    }
    if production:
        production_report = _run(production, task, storage_root, extra_args)
        out["production"] = production_report["models"]["pretrained"][split][metric]
        out["production_ci95"] = production_report["models"]["pretrained"][split].get(f"{metric}_ci95")
        out["production_sample"] = (production_report.get("per_example") or {}).get("pretrained")
    logger().info(
        "downstream %s (%s %s, %d seed(s)): candidate %.4f, from scratch %.4f%s, production %s; baselines %s",
        task,
        split,
        metric,
        len(out["seeds"] or []),
        out["candidate"],
        out["scratch"],
        " (DID NOT FIT its training set)" if out["scratch_fits"] is False else "",
        "n/a" if out["production"] is None else f"{out['production']:.4f}",
        ", ".join(f"{name} {value:.4f}" for name, value in out["baselines"].items()) or "none",
    )
    return out


def downstream_tasks(
    candidate: str, production: str | None, tasks: list[str], storage_root: str, extra_args: list[str]
) -> list[dict]:
    """downstream_task for each task, in order (the gate compares each)."""
    return [downstream_task(candidate, production, task, storage_root, extra_args) for task in tasks]


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

"""The `albert finetune` report: every model's runs (one per seed; one for a deterministic baseline)
summarised on each split, and the pretrained model's paired differences with each other model.

Statistics (promotion/downstream_stats.py): the metric of a model is computed from sums over all its
(seed, example) cells — accuracy = right / cells, entity F1 = 2TP / (2TP + FP + FN) — and its 95%
interval, like every difference's, comes from a two-way bootstrap that resamples seeds and examples
together: fine-tuning swings by points between seeds, and the test examples are a sample too. The
pretrained model and the from-scratch model are paired seed by seed (the same seeds); a baseline
with one run is paired with each seed of the pretrained model.

Report layout (a metric M is "accuracy" or "entity_f1"):
    task, metric: M, seeds: [..], checkpoint, labels, sizes, config,
    models: {name: {seeds, training (the first run's), runs: [per seed: seed, steps, seconds,
                    best_dev, train_M, dev/test metrics],
                    dev/test: {M, M_ci95, per_seed, seed_sd, n, + the means of the run metrics},
                    train_M: mean over runs,
                    lr, warmup_fraction (pretrained, scratch, scratch_same_recipe: the setting)}},
    search: {pretrained | scratch: [per setting of the grid, on the first seed: lr, warmup_fraction,
             dev_M, <final>_M, steps, seconds, chosen]}   (model/finetune.py compare)
    lift: {split, metric, M, M_paired_ci95, scratch_fits},   (pretrained - scratch)
    differences: {name: {split, metric, M, M_paired_ci95}},   (pretrained - each other model)
    per_example: {split, name: DownstreamSample JSON (k seeds x n examples)}  (what the gate pairs)
"""

from __future__ import annotations

import numpy as np

from core.figures import metric_change, metric_value, percent, points
from model.finetune_tasks import ModelRun
from promotion.downstream_stats import paired_difference, summarize
from promotion.samples import DownstreamSample

FIT_MARGIN = 0.05
"""A from-scratch model "did not fit" when its training-set metric is within this of the floor (the
majority rate; 0 entity F1): the lift over it then measures a failed training run, and the report
says so."""

METRIC_LABELS = {"accuracy": "accuracy", "entity_f1": "entity F1"}


def _sample(task: str, metric: str, runs: list[ModelRun], split: str) -> DownstreamSample:
    seeds = [run.seed if run.seed is not None else 0 for run in runs]
    return DownstreamSample.from_scores(task, metric, seeds, [run.scores[split] for run in runs])


def _mean_of_runs(runs: list[ModelRun], split: str) -> dict:
    """The mean over runs of each number the runs' metrics share (macro-F1, precision, ...)."""
    shared = set.intersection(*(set(run.metrics[split]) for run in runs))
    return {
        key: float(np.mean([run.metrics[split][key] for run in runs]))
        for key in sorted(shared)
        if all(isinstance(run.metrics[split][key], int | float) for run in runs)
    }


def model_entry(task: str, metric: str, runs: list[ModelRun], splits: list[str]) -> dict:
    """One model's report entry from its runs (module docstring)."""
    entry: dict = {"seeds": [run.seed for run in runs], "training": runs[0].training}
    entry["runs"] = [
        {
            "seed": run.seed,
            **{key: run.training[key] for key in ("steps", "seconds", "best_dev") if key in run.training},
            f"train_{metric}": run.metrics["train"][metric],
            **{split: run.metrics[split] for split in splits},
        }
        for run in runs
    ]
    for split in splits:
        summary = summarize(_sample(task, metric, runs, split))
        entry[split] = {
            **_mean_of_runs(runs, split),
            metric: summary["value"],
            f"{metric}_ci95": list(summary["ci95"]),
            "per_seed": summary["per_seed"],
            "seed_sd": summary["seed_sd"],
            "n": summary["n"],
        }
    entry[f"train_{metric}"] = float(np.mean([run.metrics["train"][metric] for run in runs]))
    return entry


def build_report(task, runs: dict[str, list[ModelRun]], seeds: list[int], final: str, floor: float) -> dict:
    """The report's models, fit check, lift, differences and per-example samples (module docstring).
    `task`: a model.finetune_tasks task; `runs`: model name -> its runs, "pretrained" and "scratch"
    first; `final`: the split compared ("test", else "dev")."""
    metric = task.metric
    splits = [split for split in ("dev", "test") if split in task.sizes]
    report: dict = {"task": task.name, "metric": metric, "seeds": seeds, "labels": task.labels}
    report["sizes"] = dict(task.sizes)
    report["models"] = {
        name: model_entry(task.name, metric, model_runs, splits) for name, model_runs in runs.items()
    }
    scratch = report["models"]["scratch"]
    train_value = scratch[f"train_{metric}"]
    scratch["fit"] = {
        f"train_{metric}": train_value,
        "floor": floor,
        "floor_name": task.floor_name,
        "fits": bool(train_value >= floor + FIT_MARGIN),
    }
    samples = {name: _sample(task.name, metric, model_runs, final) for name, model_runs in runs.items()}
    report["differences"] = {}
    for name in report["models"]:
        if name != "pretrained":
            difference = paired_difference(samples["pretrained"], samples[name])
            report["differences"][name] = {
                "split": final,
                "metric": metric,
                metric: difference["difference"],
                f"{metric}_paired_ci95": list(difference["ci95"]),
            }
    lift = report["differences"]["scratch"]
    report["lift"] = {**lift, "scratch_fits": scratch["fit"]["fits"]}
    pretrained_scores = report["models"]["pretrained"][final]
    for other in ("macro_f1", "f1", "precision", "recall"):  # means over seeds, no interval
        if other in pretrained_scores and other in scratch[final]:
            report["lift"][other] = pretrained_scores[other] - scratch[final][other]
    # Per (seed, example) scores of the final split, in a fixed order: the promotion gate pairs the
    # candidate's with production's, seed by seed, on the same examples.
    report["per_example"] = {"split": final, **{name: sample.to_json() for name, sample in samples.items()}}
    return report


def _chosen(training: dict) -> str:
    """A baseline's setting chosen on dev: {"parameter": "l2", "chosen": 1e-3} or {"chosen": {"l2": 1e-7}}."""
    chosen = training["chosen"]
    if isinstance(chosen, dict):
        return ", ".join(f"{name} {value:g}" for name, value in chosen.items())
    return f"{training['parameter']} {chosen:g}"


def format_report(report: dict) -> str:
    """The report as the terminal shows it: a line per model, each neural model's search, the scratch
    model's fit, the lift and each paired difference. Proportions in percent, their differences in
    percentage points (core.figures)."""
    metric = report.get("metric", "accuracy")
    label = METRIC_LABELS.get(metric, metric)
    split = report["lift"]["split"]
    seeds = report.get("seeds") or []
    lines = [f"{report['task']}: {report['sizes']} labels {report['labels']}, {len(seeds)} seed(s) {seeds}"]
    for name, results in report["models"].items():
        scores = results[split]
        extras = "".join(
            f" {key} {percent(scores[key])}"
            for key in ("precision", "recall", "f1", "macro_f1")
            if key in scores
        )
        training = results["training"]
        runs = results.get("runs") or [training]
        cost = (
            f"{len(runs)} run(s), {sum(run.get('steps', 0) for run in runs)} steps, "
            f"{sum(run.get('seconds', 0) for run in runs):.1f} s"
            if "steps" in training
            else f"{_chosen(training)} on dev, {training['seconds']} s"
        )
        spread = (
            f" (seed sd {points(scores['seed_sd']).lstrip('+')})"
            if len(results.get("seeds") or []) > 1
            else ""
        )
        lines.append(
            f"  {name:<23} {split} {label} {metric_value(metric, scores[metric], *scores[f'{metric}_ci95'])}"
            f"{spread}{extras}, train {label} {percent(results[f'train_{metric}'])} ({cost})"
        )
    for name, rows in (report.get("search") or {}).items():
        tried = ", ".join(
            f"lr {row['lr']:g}/warm-up {row['warmup_fraction']:g} {percent(row[f'dev_{metric}'])}"
            + (" (chosen)" if row["chosen"] else "")
            for row in rows
        )
        lines.append(f"  {name} search (seed {seeds[0] if seeds else '?'}, dev {label}): {tried}")
    scratch = report["models"]["scratch"]
    fit = scratch["fit"]
    if not fit["fits"]:
        lines.append(
            f"  WARNING: the from-scratch model did not fit its training set (train {label} "
            f"{percent(fit[f'train_{metric}'])}, {fit['floor_name']} {percent(fit['floor'])}): "
            "the lift over it measures a failed training run, not what pretraining bought"
        )
    lift = report["lift"]
    lines.append(
        f"  lift (pretrained - scratch, both tuned by the same search): {label} "
        f"{metric_change(metric, lift[metric], *lift[f'{metric}_paired_ci95'])}"
        + ("" if fit["fits"] else " (over a scratch model that did not fit)")
    )
    for name, difference in report["differences"].items():
        if name != "scratch":
            lines.append(
                f"  pretrained - {name}: {label} "
                f"{metric_change(metric, difference[metric], *difference[f'{metric}_paired_ci95'])}"
            )
    return "\n".join(lines)

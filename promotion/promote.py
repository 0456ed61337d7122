"""One promotion: act on the gate's decision (promotion/gate.py) with the registry (promotion/registry.py).

A candidate the gate promotes is registered as a new immutable version, then the production pointer
moves to it by compare-and-swap against the pointer read BEFORE the evaluation: when another promotion
moved it meanwhile, this one is recorded as a conflict and changes nothing. Every outcome (promote,
reject, conflict) goes to the promotions log. flows/promote.py is the flow that evaluates and reports.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from promotion.gate import Decision
from promotion.registry import Registry
from promotion.stores import PromotionConflict


@dataclass
class PromotionResult:
    event: str  # promote | reject | conflict
    decision: Decision
    version: str | None  # the registered version (promote, conflict)
    production: str | None  # the production version after this call
    previous: str | None  # the production version the decision was made against

    def to_dict(self) -> dict:
        return {**asdict(self), "decision": self.decision.to_dict()}


def gate_and_promote(
    registry: Registry,
    candidate_dir: str,
    candidate_metrics: dict,
    reference_metrics: dict | None,
    snapshot: tuple[dict | None, Any],
    decision: Decision,
    lineage: dict | None = None,
    spm_model: str | None = None,
    expected_sha256: dict[str, str] | None = None,
) -> PromotionResult:
    """Act on the gate's decision (promotion.gate.decide): if it promotes, register the candidate and move
    the pointer by CAS against `snapshot` (the `read_pointer()` taken BEFORE the evaluation). Every
    outcome goes to the log. reference_metrics: production's metrics, or the baselines' (display).
    expected_sha256: {file: sha256} of the candidate files that were evaluated (see Registry.register)."""
    pointer, token = snapshot
    previous = pointer["version"] if pointer else None
    lineage = {**(lineage or {}), "parent_version": (lineage or {}).get("parent_version", previous)}
    base = {
        "candidate": candidate_dir,
        "previous": previous,
        "metrics": candidate_metrics,
        "reference_metrics": reference_metrics,
        "reasons": decision.reasons,
        "flow_run_id": lineage.get("flow_run_id"),
    }
    if not decision.promote:
        registry.append_log({"event": "reject", "version": None, **base})
        return PromotionResult("reject", decision, None, previous, previous)
    version = registry.register(
        candidate_dir, {**candidate_metrics, "gate": decision.to_dict()}, lineage, spm_model, expected_sha256
    )
    try:
        registry.set_production(
            version, token, metrics=candidate_metrics, flow_run_id=lineage.get("flow_run_id")
        )
    except PromotionConflict as err:
        decision = replace(
            decision, promote=False, reasons=decision.reasons + [f"not promoted: {err}; re-run the promotion"]
        )
        registry.append_log({"event": "conflict", "version": version, **base, "reasons": decision.reasons})
        return PromotionResult("conflict", decision, version, registry.production()["version"], previous)
    registry.append_log({"event": "promote", "version": version, **base})
    return PromotionResult("promote", decision, version, version, previous)

"""The `run-summary` artifact of a re-pretraining run (the demo's and the weekly schedule's top-level
run): what each stage built or reused, the training and downstream figures, the gate's decision, and a
link to each stage's run, where its own artifacts are. Every stage artifact hangs off its stage's run;
this one is on the run a user opens first. The gate's warnings (a candidate below scratch, a constant
SOP head) stand in bold under the title; downstream figures are in percent, the lift in percentage
points (promotion/units.py)."""

from __future__ import annotations

from core import storage
from core.figures import sig
from flows.run_names import leaf
from promotion import units

# stage result key -> (what a user calls it, the artifacts on its run)
STAGES = {
    "corpus": ("corpus", "corpus-stats, corpus-report"),
    "vocab": ("vocabulary", "vocab-stats"),
    "instances": ("instances", "instance-stats"),
    "pretrain": ("pretraining", "training-summary"),
}


def run_link(label: str, flow_run_id: str | None) -> str:
    """A markdown link to a flow run in the Prefect UI (the UI's own route; relative, so it works on
    whatever host serves the UI), or the bare label where the run is unknown."""
    if not flow_run_id:
        return label
    from prefect.settings import PREFECT_UI_URL

    base = (PREFECT_UI_URL.value() or "").rstrip("/")
    return f"[{label}]({base}/runs/flow-run/{flow_run_id})"


def _outcome(stage: dict) -> str:
    if stage.get("from_production"):
        return f"reused (production {stage['from_production']})"
    if stage.get("from_checkpoint"):
        return "reused (the checkpoint it continues)"
    return "reused" if stage.get("reused") else "built"


def _corpus(stage: dict) -> str:
    try:
        stats = storage.read_json(storage.join(stage["dir"], "stats.json"))
    except (OSError, ValueError):
        return "-"
    return f"{sig(stats['kept'])} of {sig(stats['read'])} documents kept, {sig(stats['dead_letter_total'])} dead letters"


def _vocab(stage: dict) -> str:
    counts = stage.get("counts") or {}
    return f"{sig(counts['vocab_size'])} pieces" if "vocab_size" in counts else "its checkpoint's spm.model"


def _instances(stage: dict) -> str:
    summary = stage.get("summary") or {}
    train, held = (summary.get(split, {}).get("instances") for split in ("train", "eval"))
    return f"train {sig(train)}, eval {sig(held)} instances"


def _pretrain(stage: dict) -> str:
    summary = stage.get("summary") or {}
    first, last = summary.get("first_train") or {}, summary.get("last_train") or {}
    if not last:  # a run shorter than one log window (a test's few steps) logs no train loss
        return f"{leaf(stage.get('checkpoint'))}, no train loss logged"
    return f"{sig(last.get('step'))} steps, train loss {sig(first.get('loss'))} → {sig(last.get('loss'))}"


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


DETAILS = {"corpus": _corpus, "vocab": _vocab, "instances": _instances, "pretrain": _pretrain}


def summary_markdown(result: dict, minutes: float | None = None) -> str:
    """The run summary of a repretrain result (flows/repretrain.py's return value)."""
    promotion = result["promotion"]
    verdict = {
        "promote": f"PROMOTED as {promotion.get('version')}",
        "reject": "REJECTED",
        "conflict": "NOT PROMOTED (conflict)",
    }[promotion["event"]]
    lines = [
        f"# Re-pretraining: {verdict}",
        "",
        f"Production is now **{promotion.get('production') or 'none'}** (model `{promotion.get('model', 'albert')}`)."
        + (f" Took {sig(minutes, 3)} min." if minutes is not None else ""),
        "",
    ]
    warnings = promotion["decision"].get("warnings") or []
    lines += [*(f"**{warning}**" for warning in warnings), ""] if warnings else []
    lines += ["| stage | outcome | figures |", "|---|---|---|"]
    for key, (label, _) in STAGES.items():
        stage = result.get(key) or {}
        lines.append(
            f"| {run_link(label, stage.get('flow_run_id'))} | {_outcome(stage)} | {DETAILS[key](stage)} |"
        )
    gate = "pass" if promotion["decision"]["promote"] else "fail"
    lines.append(f"| {run_link('promotion', promotion.get('flow_run_id'))} | gate {gate} | {verdict} |")
    downstream = result.get("downstream") or []
    downstream = [downstream] if isinstance(downstream, dict) else downstream
    if downstream:
        # A table of its own: in the stage table the three figures made it wider than the panel.
        # Narrow enough for the UI's artifact panel at 1280 px with a production column: the split is
        # said once above the table where every task shares it, and "scratch" is the model from scratch.
        with_production = any(task.get("production") is not None for task in downstream)
        splits = {task["split"] for task in downstream}
        on = f"on the {next(iter(splits))} split, " if len(splits) == 1 else ""
        lines += [
            "",
            f"Fine-tuned on each downstream task ({on}scratch: the same model from scratch, tuned by the same "
            "search; eval-downstream has every baseline and interval):",
            "",
        ]
        lines += [
            "| task | metric | candidate | scratch | lift [95% CI] |"
            + (" production |" if with_production else "")
        ]
        lines += ["|---|---|---|---|---|" + ("---|" if with_production else "")]
        for task in downstream:
            metric = task.get("metric", "accuracy")
            low, high = task.get("lift_ci95") or (None, None)
            figures = [
                task["task"],
                metric if len(splits) == 1 else f"{task['split']} {metric}",
                units.value(metric, task["candidate"]),
                units.value(metric, task["scratch"]),
                units.change(metric, task.get("lift"), low, high),
            ]
            production = [units.value(metric, task.get("production"))] if with_production else []
            lines.append(_row(figures + production))
        predicting_one_thing = [
            f"- {task['task']}: {name} {what}"
            for task in downstream
            for name, what in (task.get("degenerate") or {}).items()
        ]
        lines += ["", *predicting_one_thing] if predicting_one_thing else []
    reasons = [r for r in promotion["decision"]["reasons"] if r not in warnings]  # each line once
    lines += ["", "Reasons:", ""] + [f"- {r}" for r in reasons]
    shown = [f"{label}: {artifacts}" for label, artifacts in STAGES.values()]
    shown.append(
        "promotion: eval-metrics, " + ("eval-downstream, " if downstream else "") + "promotion-decision"
    )
    if downstream:
        shown.append("this run: `finetune-<task>` per task")
    lines += ["", "Each stage's run holds its own artifacts (" + "; ".join(shown) + ")."]
    lines += ["", f"Storage: `{storage.dirname(result['registry'])}`; registry `{result['registry']}`."]
    return "\n".join(lines)


def summary_artifact(result: dict, minutes: float | None = None) -> None:
    from prefect.artifacts import create_markdown_artifact

    create_markdown_artifact(
        markdown=summary_markdown(result, minutes),
        key="run-summary",
        description="what this re-pretraining built or reused, and the gate's decision; links to each stage's run",
    )

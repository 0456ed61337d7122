"""The figures of `albert bench pretraining-value` (benchmarks/pretraining_value.py): per task, label
size and pretraining budget, the fine-tuned checkpoint against the model from scratch tuned by the same
search, and against the best baseline without pretraining; then the markdown table and the PNG.

Statistics are the fine-tuning report's (promotion/downstream_stats.py): a model's metric over all its
(seed, test example) cells with a two-way bootstrap 95% interval over seeds and examples; a difference
paired seed by seed and example by example (a one-run baseline is paired with each seed). The best
baseline is the one with the best dev score (choosing it on test would flatter it).
"""

from __future__ import annotations

import os

from core.figures import metric_change, metric_value, percent
from promotion.downstream_stats import paired_difference, summarize
from promotion.samples import DownstreamSample


def sample(task, runs: list, split: str = "test") -> DownstreamSample:
    seeds = [run.seed if run.seed is not None else 0 for run in runs]
    return DownstreamSample.from_scores(task.name, task.metric, seeds, [run.scores[split] for run in runs])


def _value(s: DownstreamSample) -> dict:
    summary = summarize(s)
    return {"value": summary["value"], "ci95": list(summary["ci95"]), "per_seed": summary["per_seed"]}


def _difference(a: DownstreamSample, b: DownstreamSample) -> dict:
    d = paired_difference(a, b)
    return {"value": d["difference"], "ci95": list(d["ci95"])}


def compare_unit(
    task, labels: int, run: dict, pretrained, scratch, baselines: list, head: str, linear=None
) -> dict:
    """One row: the checkpoint of pretraining `run` fine-tuned (`pretrained`, a model.finetune.Tuned)
    next to the scratch model (Tuned) and the baselines ([(name, ModelRun)]) on `task`'s test split.
    `linear`: for a CRF-head row, the same checkpoint with the linear head (their paired difference)."""
    metric = task.metric
    ours = sample(task, pretrained.runs)
    theirs = sample(task, scratch.runs) if scratch is not None else None  # None: not run (--report-only)
    best_name, best_run = max(baselines, key=lambda item: item[1].metrics["dev"][metric])
    best = sample(task, [best_run])
    row = {
        "task": task.name,
        "metric": metric,
        "labels": labels,
        "head": head,
        "steps": run["steps"],
        "budget_cpu_minutes": run.get("budget_cpu_minutes"),
        "cpu_minutes": run["cpu_seconds"] / 60,
        "wall_minutes": run["wall_seconds"] / 60,
        **{key: run["eval"][key] for key in ("mlm_accuracy", "most_frequent_token", "sop_accuracy")},
        "pretrained": {**_value(ours), "setting": list(pretrained.setting)},
        "scratch": {**_value(theirs), "setting": list(scratch.setting)} if theirs else None,
        "lift": _difference(ours, theirs) if theirs else None,
        "best_baseline": {"name": best_name, **_value(best)},
        "gap_to_best_baseline": _difference(ours, best),
        "fine_tuning_steps": [r.training["steps"] for r in pretrained.runs],
    }
    if linear is not None:
        row["crf_minus_linear"] = _difference(ours, sample(task, linear.runs))
    return row


def _cell(metric: str, item: dict) -> str:
    return metric_value(metric, item["value"], *item["ci95"])


def _change(metric: str, item: dict) -> str:
    return metric_change(metric, item["value"], *item["ci95"])


def format_table(results: dict) -> str:
    """The markdown table: a row per task, label size, budget and head; the scratch row (budget 0)
    first in each group."""
    header = (
        "| task | labels | pretraining (CPU-min, steps) | held-out MLM acc | model [95%] | scratch, same search [95%] "
        "| lift over scratch [paired 95%] | best baseline [95%] | pretrained - best baseline [paired 95%] |"
    )
    lines = [header, "|" + "---|" * 9]
    seen = set()
    for row in results["rows"]:
        metric = row["metric"]
        group = (row["task"], row["labels"])
        if group not in seen:  # the scratch model, once per group: budget 0
            seen.add(group)
            lines.append(
                f"| {row['task']} | {row['labels']:,} | 0 (scratch) | - | {_cell(metric, row['scratch'])} | - | - "
                f"| {row['best_baseline']['name']}: {_cell(metric, row['best_baseline'])} | - |"
            )
        head = "" if row["head"] == "linear" else f", {row['head']} head"
        extra = (
            f"; CRF - linear head {_change(metric, row['crf_minus_linear'])}"
            if "crf_minus_linear" in row
            else ""
        )
        scratch = _cell(metric, row["scratch"]) + head if row["scratch"] else "not run"
        lift = _change(metric, row["lift"]) if row["lift"] else "-"
        lines.append(
            f"| {row['task']} | {row['labels']:,} | {row['cpu_minutes']:.1f} ({row['steps']:,}){head} "
            f"| {percent(row['mlm_accuracy'])} | {_cell(metric, row['pretrained'])} | {scratch} "
            f"| {lift}{extra} | {row['best_baseline']['name']} "
            f"| {_change(metric, row['gap_to_best_baseline'])} |"
        )
    most_frequent = {round(r["most_frequent_token"], 4) for r in results["rows"]}
    lines += [
        "",
        f"Held-out MLM accuracy of the most frequent train token: {', '.join(percent(x) for x in sorted(most_frequent))}.",
    ]
    if results.get("probes"):
        lines += [
            "",
            "Frozen-feature probe (mean-pooled last layer, logistic regression; benchmarks/pretraining_value_probe.py):",
            "",
            "| task | labels | pretraining (CPU-min, steps) | random init, test | checkpoint, test | checkpoint - random [paired 95%] |",
            "|---|---|---|---|---|---|",
        ]
        for p in results["probes"]:
            lines.append(
                f"| {p['task']} | {p['labels']:,} | {p['cpu_minutes']:.1f} ({p['steps']:,}) | {percent(p['random'])} "
                f"| {percent(p['checkpoint'])} | {metric_change('accuracy', p['minus_random']['value'], *p['minus_random']['ci95'])} |"
            )
    if results.get("missing"):
        lines += ["", "Not run (no fine-tuning result yet): " + "; ".join(results["missing"]) + "."]
    return "\n".join(lines)


def plot(results: dict, png: str) -> None:
    """Lift over scratch (and the gap to the best baseline, dashed) against pretraining CPU-minutes,
    one panel per task, one line per label size, 95% intervals as error bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [row for row in results["rows"] if row["head"] == "linear"]
    tasks = list(dict.fromkeys(row["task"] for row in rows))
    fig, axes = plt.subplots(1, len(tasks), figsize=(6 * len(tasks), 4.2), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        for labels in sorted({row["labels"] for row in rows if row["task"] == task}):
            group = sorted(
                (r for r in rows if r["task"] == task and r["labels"] == labels), key=lambda r: r["steps"]
            )
            x = [0.0] + [r["cpu_minutes"] for r in group]
            for key, style, name in (
                ("lift", "-o", "lift over scratch"),
                ("gap_to_best_baseline", "--s", "- best baseline"),
            ):
                y = [0.0 if key == "lift" else None] + [100 * r[key]["value"] for r in group]
                low = [0.0] + [100 * (r[key]["value"] - r[key]["ci95"][0]) for r in group]
                high = [0.0] + [100 * (r[key]["ci95"][1] - r[key]["value"]) for r in group]
                start = 0 if key == "lift" else 1
                ax.errorbar(x[start:], y[start:], yerr=[low[start:], high[start:]], fmt=style, capsize=3,
                            label=f"{labels:,} labels: {name}")  # fmt: skip
        ax.axhline(0, color="grey", linewidth=0.8)
        ax.set_title(f"{task} ({'accuracy' if group[0]['metric'] == 'accuracy' else 'entity F1'}, pp)")
        ax.set_xlabel("pretraining CPU-minutes (2-core machine)")
        ax.set_ylabel("difference, percentage points [95%]")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


def write_docs(results: dict, folder: str) -> None:
    """table.md, curve.png and results.json into `folder`."""
    from benchmarks.report import write_json

    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "table.md"), "w", encoding="utf-8") as f:
        f.write(format_table(results) + "\n")
    plot(results, os.path.join(folder, "curve.png"))
    write_json(results, os.path.join(folder, "results.json"))

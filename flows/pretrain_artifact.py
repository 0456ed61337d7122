"""The pretrain flow's `training-summary`: what a run's metrics.jsonl says, for a person to read.

The eval figures here are the trainer's own last evaluation (model/trainer.py `evaluate`): the first
`eval_batches` batches of the eval split (20 by default: 320 of the demo's 905 sequences), in the
trainer's precision. The promotion gate evaluates the final checkpoint afresh on the whole eval split
(model/evaluate.py, artifact `eval-metrics`), so the two differ by the sequences they cover; the
artifact says which figure is which, and that the gate decides on the other one.
"""

from __future__ import annotations

import json

from prefect.artifacts import create_table_artifact

from core import storage
from core.figures import sig


def training_summary(run_dir: str) -> dict:
    """The first and last train records and the last eval record of metrics.jsonl, the curves' path."""
    rows = []
    path = storage.join(run_dir, "metrics.jsonl")
    if storage.exists(path):
        for line in storage.read_text(path).splitlines():
            try:
                rows.append(json.loads(line))
            except ValueError:  # a torn last line, as a killed run leaves it
                continue
    train = [record for record in rows if record.get("kind") == "train" and "loss" in record]
    evals = [record for record in rows if record.get("kind") == "eval"]
    curves = storage.join(run_dir, "curves.png")
    return {
        "first_train": train[0] if train else None,
        "last_train": train[-1] if train else None,
        "last_eval": evals[-1] if evals else None,
        "loss_curve_png": curves if storage.exists(curves) else None,
    }


def eval_scope(last_eval: dict, split_sequences: int | None) -> str:
    """What the trainer's last eval covered, short enough for a table cell: "trainer's eval, step 250:
    320 of 905 sequences" (of the eval split). Records written before the trainer counted its
    sequences say "first batches"."""
    where = f"trainer's eval, step {last_eval.get('step')}"
    seen = last_eval.get("sequences")
    if seen is None:
        return f"{where}: first batches"
    if split_sequences is None:
        return f"{where}: {sig(seen)} sequences"
    if seen < split_sequences:
        return f"{where}: {sig(seen)} of {sig(split_sequences)} sequences"
    if seen == split_sequences:
        return f"{where}: all {sig(split_sequences)} sequences"
    return f"{where}: {sig(seen)} sequences ({sig(split_sequences)} repeated)"


def training_rows(summary: dict, split_sequences: int | None) -> list[dict]:
    """The training-summary table: figure, value (core.figures.sig), and what it was measured on."""
    first, last = summary.get("first_train") or {}, summary.get("last_train") or {}
    last_eval = summary.get("last_eval") or {}
    rows = [("steps", last.get("step", last_eval.get("step")), "")]
    if last:  # none when the run logged no window (log_every off)
        last_window = f"log window ending at step {last['step']}"
        rows += [
            ("train loss", first.get("loss"), f"log window ending at step {first['step']}"),
            ("train loss", last.get("loss"), last_window),
            ("train MLM accuracy", last.get("mlm_acc"), last_window),
            ("train SOP accuracy", last.get("sop_acc"), last_window),
            ("tokens/s", last.get("tokens_per_s"), last_window),
        ]
    if last_eval:
        scope = eval_scope(last_eval, split_sequences)
        rows += [
            ("eval MLM loss", last_eval.get("masked_lm_loss"), scope),
            ("eval MLM accuracy", last_eval.get("masked_lm_accuracy"), scope),
            ("eval SOP accuracy", last_eval.get("sentence_order_accuracy"), scope),
        ]
    return [{"figure": name, "value": sig(value), "measured on": on} for name, value, on in rows]


def eval_split_sequences(instances_dir: str | None) -> int | None:
    """How many sequences the instances' eval split holds (their manifest's summary), None if unknown."""
    path = storage.join(instances_dir, "manifest.json") if instances_dir else None
    if not path or not storage.exists(path):
        return None
    return ((storage.read_json(path).get("summary") or {}).get("eval") or {}).get("instances")


def training_artifact(run_dir: str, manifest: dict) -> list[dict]:
    """The training-summary table artifact of a finished run folder (its manifest); returns its rows.
    Paths go in the description, never in the table."""
    summary = manifest["summary"]
    rows = training_rows(summary, eval_split_sequences(manifest.get("instances")))
    details = [f"Final checkpoint: `{manifest['checkpoint']}`"]
    if summary.get("loss_curve_png"):
        details.append(f"Loss curves: `{summary['loss_curve_png']}`")
    details.append(f"Run folder: `{run_dir}`")
    note = (
        "The eval figures are the trainer's own last evaluation, on the first batches of the eval split "
        "(`eval_batches`). The promotion gate evaluates the final checkpoint on the whole eval split: its "
        "figures, the ones it decides on, are in the `eval-metrics` artifact and differ from these by the "
        "sequences they cover."
    )
    create_table_artifact(
        table=rows,
        key="training-summary",
        description="Pretraining: losses, accuracies and speed. " + note + "\n\n" + "  \n".join(details),
    )
    return rows

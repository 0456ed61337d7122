"""A stopped flow keeps the trainer's work.

- `stream_process`, stopped while it streams a stage (Prefect raises in its thread), sends SIGTERM to
  the stage's process group, goes on logging what the stage prints, and kills it only after the grace
  period.
- The pretrain flow as Prefect's runner cancels it: the flow process (against the test API server)
  gets SIGTERM once the trainer has done some steps. The trainer finishes its step in flight, writes
  that checkpoint and is gone when the flow has exited; the flow logged the trainer's `interrupted`
  line. A rerun of the flow resumes there and ends bit-identical to an uninterrupted flow run.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from flows.stage_process import stream_process
from model import checkpoint as ckpt
from tests.model.train_fixtures import ROOT, finished, instances_dir, model_config_file, start_group  # noqa: F401 (fixtures)


class Stopped(BaseException):
    """Stands for what Prefect raises in the flow's thread when the run is cancelled."""


# A stage that saves on SIGTERM (0.5 s), says so and exits 143; or one that ignores SIGTERM.
SAVES_ON_SIGTERM = """
import os, signal, sys, time
stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
print(os.getpid(), flush=True)
while not stop:
    time.sleep(0.01)
time.sleep(0.5)
print("saved step-7", flush=True)
sys.exit(143)
"""
IGNORES_SIGTERM = """
import os, signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print(os.getpid(), flush=True)
time.sleep(600)
"""


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def trainers(pid: int) -> list[psutil.Process]:
    """The `albert pretrain` processes under pid (not their loader workers, which share the command)."""

    def is_trainer(p: psutil.Process) -> bool:
        return "flows.cli" in p.cmdline() and "pretrain" in p.cmdline()

    return [
        p
        for p in psutil.Process(pid).children(recursive=True)
        if is_trainer(p) and not is_trainer(p.parent())
    ]


def stop_after_first_line(lines: list[str]):
    def log(line: str) -> None:
        lines.append(line)
        if len(lines) == 1:
            raise Stopped()

    return log


def test_a_stopped_stage_gets_sigterm_and_its_last_lines_are_logged():
    lines: list[str] = []
    with pytest.raises(Stopped):
        stream_process(
            [sys.executable, "-c", SAVES_ON_SIGTERM], stop_after_first_line(lines), stop_grace_s=60
        )
    assert lines[1:] == ["saved step-7"] and gone(int(lines[0]))

    lines = []
    started = time.monotonic()
    with pytest.raises(Stopped):
        stream_process([sys.executable, "-c", IGNORES_SIGTERM], stop_after_first_line(lines), stop_grace_s=1)
    assert gone(int(lines[0])) and time.monotonic() - started < 60  # killed after its grace


# ------------------------------------------------------------------------------- the pretrain flow

STEPS = 60
FLOW = """
import json, sys
from flows.pretrain import pretrain
pretrain(**json.loads(sys.argv[1]))
"""


def flow_process(params: dict, home: str) -> subprocess.Popen:
    """The pretrain flow in its own process (and process group, as Prefect's runner starts a flow
    run), against this session's test API server."""
    from prefect.settings import PREFECT_API_URL

    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(
        PREFECT_API_URL=PREFECT_API_URL.value(),
        PREFECT_HOME=home,
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PYTHONPATH=ROOT,
        PYTHONUNBUFFERED="1",
        OMP_NUM_THREADS="1",  # bit-exact reruns
    )
    return start_group([sys.executable, "-c", FLOW, json.dumps(params)], env, stderr=subprocess.STDOUT)


def flow_params(instances: str, config: str, root: str) -> dict:
    return dict(
        instances_dir=instances,
        storage_root=root,
        config=config,
        steps=STEPS,
        batch_size=8,
        lr=1e-2,
        warmup_steps=2,
        save_every=1000,  # any checkpoint before the end is the one the stop wrote
        log_every=1,
        device="cpu",
        extra_args=["--num-workers", "1", "--shuffle-window", "64", "--eval-batches", "2"],
    )


def final_weights(root: str) -> bytes:
    (run,) = glob.glob(os.path.join(root, "runs", "*"))
    path = ckpt.latest(run)
    assert path.endswith(f"step-{STEPS}"), path
    return open(os.path.join(path, "model.safetensors"), "rb").read()


@pytest.mark.slow
def test_a_flow_stopped_with_sigterm_keeps_the_step_in_flight_and_its_rerun_ends_identical(
    tmp_path,
    instances_dir,  # noqa: F811
    model_config_file,  # noqa: F811
):
    reference_root, root = str(tmp_path / "reference"), str(tmp_path / "factory")
    home = str(tmp_path / "prefect-home")
    finished(flow_process(flow_params(instances_dir, model_config_file, reference_root), home))
    reference = final_weights(reference_root)

    flow = flow_process(flow_params(instances_dir, model_config_file, root), home)
    deadline, trainer = time.monotonic() + 300, None
    while time.monotonic() < deadline and flow.poll() is None:
        metrics = glob.glob(os.path.join(root, "runs", "*", "metrics.jsonl"))
        if metrics and '"step": 5,' in open(metrics[0]).read():
            (trainer,) = trainers(flow.pid)
            break
        time.sleep(0.05)
    assert trainer is not None, flow.communicate()[0][-5000:]
    sent = time.monotonic()
    os.killpg(flow.pid, signal.SIGTERM)  # what Prefect's runner does to a cancelled flow run
    out, _ = flow.communicate(timeout=600)
    seconds = time.monotonic() - sent

    assert flow.returncode != 0, out[-5000:]
    assert gone(trainer.pid), "the trainer outlived its flow"
    (run,) = glob.glob(os.path.join(root, "runs", "*"))
    (stopped,) = ckpt.list_steps(run)
    assert 5 <= stopped < STEPS
    line = f"albert pretrain: interrupted: SIGTERM at step {stopped}: saved {ckpt.step_dir(run, stopped)}"
    assert line in out, out[-5000:]  # the trainer's last line, logged by the flow
    assert not os.path.exists(os.path.join(run, "manifest.json"))
    print(f"\nflow SIGTERM: trainer stopped at step {stopped}; flow exited {seconds:.2f} s after the signal")

    again = finished(flow_process(flow_params(instances_dir, model_config_file, root), home))
    assert f"resumed from {ckpt.step_dir(run, stopped)} (step {stopped})" in again
    assert final_weights(root) == reference  # bit-exact


# ------------------------------------------------------------------------- a real Prefect cancel

SERVE = """
import json, sys
import prefect
from flows.pretrain import pretrain
prefect.serve(pretrain.to_deployment(name="cancel-probe", parameters=json.loads(sys.argv[1])), limit=1)
"""


def wait_for(what: str, check, proc: subprocess.Popen, log_path: str, timeout: float = 300):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        if proc.poll() is not None:
            break
        time.sleep(0.5)
    pytest.fail(f"{what}: not within {timeout} s; serve log:\n{open(log_path).read()[-5000:]}")


@pytest.mark.slow
def test_a_deployment_run_cancelled_through_the_api_keeps_the_step_in_flight(
    tmp_path,
    instances_dir,  # noqa: F811
    model_config_file,  # noqa: F811
):
    """`prefect.serve` runs the deployment (a Runner, as `albert serve` does); the test creates a run
    and cancels it through the API, as the UI's Cancel button does. The Runner SIGTERMs the flow run's
    process; the trainer saves its step in flight; the run ends Cancelled."""
    from prefect.client.orchestration import get_client
    from prefect.deployments import run_deployment
    from prefect.exceptions import ObjectNotFound
    from prefect.settings import PREFECT_API_URL
    from prefect.states import Cancelling

    from flows.server import stop_process_group
    from tests.flows.conftest import flow_run_logs

    root = str(tmp_path / "factory")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(
        PREFECT_API_URL=PREFECT_API_URL.value(),
        PREFECT_HOME=str(tmp_path / "serve-home"),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PREFECT_RUNNER_POLL_FREQUENCY="2",
        PYTHONPATH=ROOT,
        PYTHONUNBUFFERED="1",
        OMP_NUM_THREADS="1",
    )
    params = flow_params(instances_dir, model_config_file, root) | {"steps": 2000}
    log_path = str(tmp_path / "serve.log")
    with open(log_path, "ab") as log:
        server = subprocess.Popen(
            [sys.executable, "-c", SERVE, json.dumps(params)],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        with get_client(sync_client=True) as client:

            def deployment():
                try:
                    return client.read_deployment_by_name("pretrain/cancel-probe")
                except ObjectNotFound:
                    return None

            wait_for("the deployment registered", deployment, server, log_path)
            run = run_deployment("pretrain/cancel-probe", timeout=0)
            metrics = os.path.join(root, "runs", "*", "metrics.jsonl")
            wait_for(
                "the trainer at step 5",
                lambda: any('"step": 5,' in open(p).read() for p in glob.glob(metrics)),
                server,
                log_path,
            )
            (trainer,) = trainers(server.pid)
            sent = time.monotonic()
            client.set_flow_run_state(run.id, Cancelling(), force=True)  # the UI's Cancel

            def cancelled():
                state = client.read_flow_run(run.id).state
                return state is not None and state.is_cancelled() and gone(trainer.pid)

            wait_for("the run Cancelled, its trainer gone", cancelled, server, log_path)
            seconds = time.monotonic() - sent
    finally:  # the flow run and its trainer lead process groups of their own: stopped one by one
        left = psutil.Process(server.pid).children(recursive=True)
        stop_process_group(server)
        for p in left:
            with contextlib.suppress(psutil.Error):
                p.kill()

    (run_dir,) = glob.glob(os.path.join(root, "runs", "*"))
    (stopped,) = ckpt.list_steps(run_dir)
    line = f"albert pretrain: interrupted: SIGTERM at step {stopped}: saved {ckpt.step_dir(run_dir, stopped)}"
    assert any(line in message for message in flow_run_logs(run.id))  # in the run's logs, in the UI
    print(
        f"\nPrefect cancel: trainer stopped at step {stopped}; run Cancelled {seconds:.1f} s after the request"
    )

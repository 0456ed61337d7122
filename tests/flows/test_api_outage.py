"""A flow rides out a Prefect API outage longer than Prefect's own retries (flows/__init__.py).

Before: the API down for about 90 s just after a stage had published its output, and the flow process
exited 1 with a 210-line httpx traceback; the run was Failed. Prefect's client retries a call that
cannot connect 5 times, 2 to 32 s apart (62 s in all); the flows retry 8 times (about 8.5 minutes)."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import time

import pytest

from tests.cli import ROOT

OUTAGE_S = 75  # longer than Prefect's default retries (2 + 4 + 8 + 16 + 32 = 62 s)
FLOW = (
    "import sys\n"
    "from flows.build_corpus import build_corpus\n"
    "print(build_corpus(sources=[sys.argv[1]], storage_root=sys.argv[2])['dir'])\n"
)


@pytest.mark.slow  # two server starts and a 75 s outage
def test_a_flow_rides_out_an_api_outage_after_its_stage_published(tmp_path, sample_text):
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from flows.server import free_port, local_server

    home, port, root = str(tmp_path / "prefect-home"), free_port(), tmp_path / "root"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}  # flows sets its own
    env.update(PYTHONPATH=ROOT, PREFECT_SERVER_ANALYTICS_ENABLED="false")
    with local_server(home, port) as api:
        cmd = [sys.executable, "-c", FLOW, f"text:{sample_text}", str(root)]
        proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env={**env, "PREFECT_API_URL": api},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        deadline = time.monotonic() + 600
        while not glob.glob(str(root / "corpus" / "*" / "manifest.json")):  # the stage published
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the corpus stage did not finish in 10 minutes"
            time.sleep(0.2)
    outage_began = time.monotonic()  # the server is stopped: its API refuses connections
    time.sleep(OUTAGE_S)
    with local_server(home, port) as api:  # the same database, the same address
        try:
            out, err = proc.communicate(timeout=600)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, 9)
        assert proc.returncode == 0, err[-4000:]
        assert time.monotonic() - outage_began > OUTAGE_S
        assert out.strip().endswith(
            os.path.dirname(glob.glob(str(root / "corpus" / "*" / "manifest.json"))[0])
        )
        with temporary_settings({PREFECT_API_URL: api}), get_client(sync_client=True) as client:
            (run,) = [r for r in client.read_flow_runs() if r.name and r.flow_id]
            assert run.state is not None and run.state.is_completed(), run.state


def test_importing_flows_sets_the_api_retries_before_prefect_reads_them_and_a_users_value_wins():
    code = "import flows\nfrom prefect.settings import PREFECT_CLIENT_MAX_RETRIES as R\nprint(R.value())"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    ours = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert ours.stdout.strip() == "8", ours.stderr[-2000:]
    env["PREFECT_CLIENT_MAX_RETRIES"] = "3"
    theirs = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert theirs.stdout.strip() == "3", theirs.stderr[-2000:]

"""The Prefect CLI as its users type it, against a real `prefect server start` (flows/rehearsal/prefect_check.py):
`albert deploy`, `prefect work-pool ls`, `prefect deployment ls`, `prefect deployment run`,
`prefect flow-run ls`, and a real `prefect worker start --pool albert-process` that runs
build-corpus/local to Completed (slow; `albert rehearse` runs the same check).

The 422 these commands once got, and the pin that fixed it, are in flows/rehearsal/prefect_check.py; the first test
names that cause if the pin moves. Run with -s to see the commands' output.
"""

from __future__ import annotations

import json
import os

import pytest

from flows.rehearsal.prefect_check import RUN_NAME, check
from tests.flows.test_deploy import EXPECTED

POOLS = (
    "albert-process",
    "albert-gpu-vertex",
    "albert-gpu-kubernetes",
    "albert-gpu-docker",
    "albert-tpu-kubernetes",
)


def test_the_pinned_fastapi_takes_a_null_body_parameter_for_its_default():
    """The cause of the 422, without a server: an endpoint declared as Prefect 3.8.8's server declares
    `limit` (`int = Body(None)`), posted `"limit": null` as its client posts it."""
    import fastapi
    from fastapi import Body, FastAPI
    from fastapi.testclient import TestClient

    app = FastAPI()

    @app.post("/filter")
    def read(limit: int = Body(None), offset: int = Body(0)) -> dict:
        return {"limit": limit, "offset": offset}

    response = TestClient(app).post("/filter", json={"limit": None, "offset": 0})
    assert response.status_code == 200, (
        f"fastapi {fastapi.__version__} refuses a null body parameter ({response.status_code}: "
        f"{response.text}); Prefect 3.8.8's CLI list commands then fail with 422 (constraints.txt)"
    )
    assert response.json() == {"limit": None, "offset": 0}


def _row(output: str, name: str) -> str:
    return next((line for line in output.splitlines() if name in line), "")


# Slow (CI runs the slow tier): a Prefect server, `albert deploy`, seven CLI processes and a worker, about
# a minute and a half. The rehearsal's test leaves this check to this test.
@pytest.mark.slow
def test_list_commands_show_what_deploy_created_and_a_worker_runs_a_deployment_to_completed(tmp_path):
    """check() itself raises unless the scheduled run is listed Scheduled, the worker's run ended
    Completed on albert-process and its logs say that the worker it started submitted it
    (flows/rehearsal/prefect_check.py: check_worker_ran_it)."""
    result = check(str(tmp_path))
    out = result.outputs
    assert all(name in out["prefect work-pool ls"] for name in POOLS)
    assert all(name in out["prefect deployment ls"] for name in EXPECTED)
    assert (
        _row(out["prefect deployment ls"], "pretrain/gpu-vertex").rstrip(" │").endswith("albert-gpu-vertex")
    )
    listed = _row(out["prefect flow-run ls --flow-name train-vocab"], RUN_NAME)
    assert result.scheduled_id in listed and "SCHEDULED" in listed
    # The stage flow named its run when it started (flows/run_names.py), over --flow-run-name.
    listed = _row(out["prefect flow-run ls --flow-name build-corpus"], result.flow_run_id)
    assert "corpus | text | DirectRunner" in listed and "COMPLETED" in listed and result.state == "Completed"
    (corpus,) = os.listdir(tmp_path / "factory" / "corpus")  # what the worker's run built
    with open(tmp_path / "factory" / "corpus" / corpus / "manifest.json", encoding="utf-8") as f:
        assert json.load(f)["counts"]["read"] == 50

"""A tiny flow for tests/flows/test_schedule.py, and the serving entry it runs as a subprocess.

It lives in an importable module (not `__main__`, not the test file) because the Runner behind
`prefect.serve` starts each flow run in a spawned process, which has to import the flow by its module.
The serving process is started as

    python -c "import sys; from tests.flows.scheduled_flow import main; sys.exit(main(sys.argv[1:]))" \
        --marker-dir DIR --interval-seconds 5

(from the repository root) so that the flow's module is `tests.flows.scheduled_flow`, never `__main__`.
"""

from __future__ import annotations

import argparse
import json
import os
from datetime import timedelta

from prefect import flow

FLOW_NAME = "albert-schedule-probe"
DEPLOYMENT_NAME = "every-few-seconds"


@flow(name=FLOW_NAME)
def touch_marker(marker_dir: str, note: str = "scheduled") -> str:
    """Write `<marker_dir>/<flow run id>.json` (run id, name, note) and return its path."""
    from prefect.runtime import flow_run

    os.makedirs(marker_dir, exist_ok=True)
    path = os.path.join(marker_dir, f"{flow_run.id}.json")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"flow_run_id": flow_run.id, "flow_run_name": flow_run.name, "note": note}, f)
    os.replace(tmp, path)  # a reader never sees half a file
    return path


def deployment(marker_dir: str, interval_seconds: float):
    """The RunnerDeployment that is served: touch_marker on an interval schedule, the way
    flows/deployments.py `serve_deployments` builds them (Flow.to_deployment with prefect.schedules)."""
    from prefect.schedules import Interval

    return touch_marker.to_deployment(
        name=DEPLOYMENT_NAME,
        parameters={"marker_dir": marker_dir},
        schedules=[Interval(timedelta(seconds=interval_seconds), parameters={"note": "from-schedule"})],
        tags=["test-schedule"],
    )


def main(argv: list[str] | None = None) -> int:
    """Serve the deployment against PREFECT_API_URL until terminated (prefect.serve, as `albert serve`)."""
    import prefect

    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--marker-dir", required=True)
    p.add_argument("--interval-seconds", type=float, default=5)
    p.add_argument("--limit", type=int, default=1)
    args = p.parse_args(argv)
    prefect.serve(deployment(args.marker_dir, args.interval_seconds), limit=args.limit)
    return 0

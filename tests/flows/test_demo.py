"""`albert demo` end to end, twice, as a user runs it (its own process, its own ephemeral Prefect
server): the second run reuses every data stage and puts a new candidate through the gate."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from flows.deploy import REPO_ROOT


@pytest.mark.slow
def test_demo_twice(tmp_path):
    out = tmp_path / "demo"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}  # not the test server
    env["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
    cmd = [sys.executable, "-m", "flows.cli", "demo", "--out", str(out), "--steps", "20", "--batch-size", "8", "--max-seq-length", "64", "--max-predictions", "10", "--finetune-task", ""]  # fmt: skip

    first = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=1800)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "ALBERT factory demo: summary" in first.stdout and "Where everything is" in first.stdout
    r1 = json.loads((out / "result.json").read_text())
    assert os.path.isdir(out / "prefect-home")  # the ephemeral server's database lives with the demo

    second = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=1800)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    r2 = json.loads((out / "result.json").read_text())
    for stage in ("corpus", "instances"):
        assert r2[stage]["reused"] and r2[stage]["dir"] == r1[stage]["dir"], stage
    # a new candidate: warm-started from the first one (or from production), so another run folder
    assert r2["pretrain"]["dir"] != r1["pretrain"]["dir"] and not r2["pretrain"]["reused"]
    assert r2["promotion"]["event"] in ("promote", "reject")
    log = [
        json.loads(line)
        for line in (out / "registry" / "albert" / "promotions.jsonl").read_text().splitlines()
    ]
    assert len(log) == 2
    assert "[reused]" in second.stdout

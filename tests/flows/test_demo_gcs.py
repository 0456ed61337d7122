"""`albert demo --out gs://BUCKET/...` end to end, twice, on the local GCS emulator: the production
path's contract (everything in the bucket, nothing written locally but temporary and cache folders).
A file of its own, so that pytest -n runs it beside the local demo (tests/flows/test_demo.py), not
after it."""

from __future__ import annotations

import json
import os
import sys

import pytest

from flows.deploy import REPO_ROOT
from tests.cli import run_bounded


@pytest.mark.slow
def test_demo_on_gcs_twice_writes_only_to_the_bucket(tmp_path, bucket):
    """The contract of the production path: `albert demo --out gs://BUCKET/demo` with no credentials
    (STORAGE_EMULATOR_HOST), twice. The first run promotes v1; the second reuses corpus, vocabulary
    (v1's) and instances, trains a candidate that continues from v1, and puts it through the gate
    (which evaluates production afresh, beside it). Locally only temporary and cache folders are
    written."""
    from core import storage

    out = f"{bucket}/demo"
    cwd, cache, tmp = tmp_path / "cwd", tmp_path / "cache", tmp_path / "tmp"
    for d in (cwd, cache, tmp):
        d.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        XDG_CACHE_HOME=str(cache),
        TMPDIR=str(tmp),
        PYTHONPATH=REPO_ROOT,
    )
    # Smaller than the demo's defaults (its fine-tuning alone is most of half an hour on 2 cores): what this
    # test holds is where things are written. Fine-tuning on GCS is the rehearsal's (test_rehearse.py),
    # the demo's own figures the demo's. Enough steps that the first candidate beats the baselines; the
    # second candidate, whose fate is not what is tested, trains for 20 (another pretraining key).
    small = ["--max-seq-length", "64", "--max-predictions", "10", "--finetune-tasks", ""]
    cmd = [sys.executable, "-m", "flows.cli", "demo", "--out", out, *small]

    first = run_bounded([*cmd, "--steps", "150"], 2400, cwd=cwd, env=env)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    r1 = storage.read_json(f"{out}/result.json")
    assert r1["promotion"]["event"] == "promote" and r1["promotion"]["version"] == "v1", r1["promotion"]
    assert storage.read_json(f"{out}/registry/albert/production.json")["version"] == "v1"
    for stage in ("corpus", "vocab", "instances", "pretrain"):
        assert r1[stage]["dir"].startswith(f"{out}/"), stage

    second = run_bounded([*cmd, "--steps", "20"], 2400, cwd=cwd, env=env)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    r2 = storage.read_json(f"{out}/result.json")
    for stage in ("corpus", "instances"):
        assert r2[stage]["reused"] and r2[stage]["dir"] == r1[stage]["dir"], stage
    assert r2["vocab"]["from_production"] == "v1"
    assert r2["pretrain"]["dir"] != r1["pretrain"]["dir"]  # continues from v1: a new run folder
    assert r2["promotion"]["event"] in ("promote", "reject")
    log = storage.read_text(f"{out}/registry/albert/promotions.jsonl").splitlines()
    assert [json.loads(line)["event"] for line in log][0] == "promote" and len(log) == 2

    assert os.listdir(cwd) == []  # no relative path anywhere
    homes = os.listdir(cache / "albert" / "prefect-home")  # Prefect's database: a cache folder
    assert len(homes) == 1 and homes[0].startswith("gs-")

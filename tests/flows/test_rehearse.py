"""`albert rehearse`: its pieces in the default suite (the schedule's parameters and their stand-ins, the
Dataflow options, the dumps it writes), the whole rehearsal as a slow test."""

from __future__ import annotations

import os
import sys

import pytest

from flows.deploy import REPO_ROOT
from tests.cli import run_bounded


def test_the_options_are_generated_from_the_dataclass():
    import argparse

    from core import config_cli
    from flows.rehearsal import rehearse

    parser = argparse.ArgumentParser()
    rehearse.add_arguments(parser)
    options = config_cli.from_args(rehearse.RehearseOptions, parser.parse_args(["--steps", "20"]))
    assert options == rehearse.RehearseOptions(steps=20, articles=1200)
    assert config_cli.to_argv(options) == ["--steps", "20"]
    argv = ["--no-portable", "--no-prefect-cli"]
    options = config_cli.from_args(rehearse.RehearseOptions, parser.parse_args(argv))
    assert not options.portable and not options.prefect_cli and config_cli.to_argv(options) == argv


def test_the_rehearsal_runs_the_weekly_schedule_with_valid_stand_ins():
    from flows.deploy import parameter_problems
    from flows.rehearsal import rehearse
    from flows.repretrain import repretrain

    production, beam_args = rehearse.weekly_parameters("gs://b/factory", "gs://b/dumps")
    assert production["storage_root"] == "gs://b/factory" and production["corpus_runner"] == "DataflowRunner"
    assert production["sources"][0] == "zhwiki:gs://b/dumps/zhwiki-*-pages-articles-multistream.xml.bz2"
    assert production["micro_batch_size"] == "auto" and production["nproc_per_node"] == 8
    staged = {**production, **{k: v for k, (v, _) in rehearse.STAND_INS.items()}, "steps": 10}
    assert parameter_problems(repretrain, staged, complete=True, where="rehearsal") == []
    assert "--project=my-gcp-project" in beam_args


def test_the_dataflow_options_are_what_the_corpus_stage_would_send():
    from flows.rehearsal import rehearse

    _, beam_args = rehearse.weekly_parameters("gs://b/factory", "gs://b/dumps")
    flags = rehearse.dataflow_flags(beam_args)
    assert flags[flags.index("--runner") + 1] == "DataflowRunner"
    assert "--temp_location=gs://b/factory/tmp/dataflow" in flags
    assert any(f.startswith("--sdk_container_image=") for f in flags)


def test_the_dumps_are_read_as_the_weekly_sources(bucket):
    from flows.build_corpus import newest_sources
    from flows.rehearsal import rehearse
    from pipelines.corpus.options import CorpusOptions
    from pipelines.corpus.sources import plan_sources, read_work, split_work

    written = rehearse.write_dumps(f"{bucket}/dumps", 60)
    production, _ = rehearse.weekly_parameters(f"{bucket}/factory", f"{bucket}/dumps")
    items = plan_sources(newest_sources(production["sources"]))
    assert [i["kind"] for i in items] == ["zhwiki", "news2016zh"]
    assert items[0]["index"] == written["index"]  # the multistream index found beside the dump
    opts = CorpusOptions()
    records = [r for item in items for part in split_work(item, opts) for r in read_work(part, opts)]
    assert len(records) == written["zhwiki pages"] + written["news articles"]


# Slow, and in CI (make test-all). Without the portable runner's and the Prefect CLI's checks: the slow
# tests of tests/pipelines/test_portable.py and tests/flows/test_prefect_cli.py run them, with more
# assertions; `make rehearse` runs the whole.
@pytest.mark.slow
def test_make_rehearse(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "STORAGE_EMULATOR"))}
    env.update(TMPDIR=str(tmp_path), XDG_CACHE_HOME=str(tmp_path / "cache"), PYTHONPATH=REPO_ROOT)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    cmd = [sys.executable, "-m", "flows.cli", "rehearse", "--no-portable", "--no-prefect-cli"]
    done = run_bounded(cmd, 3600, cwd=cwd, env=env)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-5000:]
    assert "Beam's portable path" not in log and "albert deploy, the CLI's list commands" not in log
    for needle in (
        "Options the corpus and instance stages would send to Dataflow:",
        "--runner DataflowRunner",
        "week 1: the schedule fires",
        "PROMOTED as v1",
        "week 2: the schedule fires",
        "handing pretraining to deployment pretrain/gpu-rehearsal",
        "torch.distributed.run --nproc_per_node=2",
        "PROMOTED as v2",
        "production is v1 again (was v2)",
        "registry log: promote, promote, rollback",
    ):
        assert needle in log, needle
    assert os.listdir(cwd) == []

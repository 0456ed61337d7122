"""`albert bench scale`: the fits (exact on known inputs), the process-tree sampler on a real tree, the
report (table, JSON, PNG), and one end-to-end run through the real commands (slow)."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import textwrap

import pytest

from benchmarks import cli, scale
from benchmarks.proctree import run_measured
from core.errors import UserError

MB = 2**20


# --- fits -------------------------------------------------------------------------------------------------


def test_fit_line_is_exact_on_a_line():
    slope, intercept = scale.fit_line([1, 2, 4, 8], [13, 23, 43, 83])
    assert slope == pytest.approx(10) and intercept == pytest.approx(3)


def test_fit_line_least_squares_and_degenerate_input():
    slope, intercept = scale.fit_line([0, 1, 2], [0, 2, 1])  # mean (1, 1), sxy 1, sxx 2
    assert slope == pytest.approx(0.5) and intercept == pytest.approx(0.5)
    with pytest.raises(ValueError):
        scale.fit_line([3, 3], [1, 2])


@pytest.mark.parametrize("k", [0.0, 0.5, 1.0, 1.05, 2.0])
def test_growth_exponent_of_a_power_law(k):
    xs = [1.8e6, 7.2e6, 28.8e6]
    assert scale.growth_exponent(xs, [3.5 * x**k for x in xs]) == pytest.approx(k)


def test_growth_exponent_least_squares_and_undefined_cases():
    # log-log points (0, 0), (1, 1), (2, 1): slope of the fit 0.5
    e = math.e
    assert scale.growth_exponent([1, e, e * e], [1, e, e]) == pytest.approx(0.5)
    assert scale.growth_exponent([5], [2]) is None
    assert scale.growth_exponent([1, 2], [0, 1]) is None


def _run(copies: int, chars: int, docs: int, cpu: float, main_mb: float, sum_mb: float, worker_mb) -> dict:
    stage = {
        "cpu_s": cpu,
        "rusage_cpu_s": cpu,
        "polled_cpu_s": cpu * 0.99,
        "wall_s": cpu / 2,
        "main_peak_rss_mb": main_mb,
        "worker_peak_rss_mb": worker_mb,
        "worker_processes": 2,
        "sum_peak_rss_mb": sum_mb,
        "output_bytes": chars * 3,
        "docs_in": docs,
        "docs_out": docs - 10,
        "out_unit": "documents",
        "chars_per_cpu_s": round(chars / cpu),
        "processes": [],
        "samples": 10,
    }
    return {
        "copies": copies,
        "documents": docs,
        "characters": chars,
        "planted": copies * 60,
        "generate_s": 1.0,
        "stages": {s: dict(stage) for s in scale.STAGES},
        "near_dup": {"recall": 0.99, "precision": 1.0},
    }


def _synthetic_result() -> dict:
    # corpus memory: 400 MB + 10 KB per document; CPU linear in the input; workers flat
    runs = [
        _run(
            n, 1_800_000 * n, 3000 * n, 4.0 * n, 400 + 3000 * n * 10 / 1024, 700 + 3000 * n * 10 / 1024, 300.0
        )
        for n in (1, 4, 16)
    ]
    exps = scale.growth(runs)
    memory = scale.corpus_memory(runs)
    return {
        "workers": 2,
        "cpus": 2,
        "load_average": 1.0,
        "scales": runs,
        "growth": exps,
        "growth_last_step": scale.growth(runs[-2:]),
        "corpus_memory": memory,
        "targets": scale.targets(runs, exps, memory),
    }


def test_curve_figures_and_targets_on_known_runs():
    result = _synthetic_result()
    corpus = result["growth"]["corpus"]
    assert corpus["cpu_s"] == pytest.approx(1.0) and corpus["output_bytes"] == pytest.approx(1.0)
    assert result["growth"]["instances"]["worker_peak_rss_mb"] == pytest.approx(0.0)
    memory = result["corpus_memory"]
    assert memory["kb_per_doc"] == pytest.approx(10.0, abs=0.01)
    assert memory["main_kb_per_doc"] == pytest.approx(10.0, abs=0.01)
    assert memory["intercept_mb"] == pytest.approx(700.0, abs=0.1)
    # 700 MB + 10 KB x 1.3M documents
    assert memory["zhwiki_peak_gb"] == pytest.approx((700 * MB + 10 * 1024 * 1.3e6) / 2**30, abs=0.01)
    assert memory["max_documents_24gb"] == int((24 * 2**30 - 700 * MB) / (10 * 1024))
    verdicts = {t["target"]: t["pass"] for t in result["targets"]}
    assert all(verdicts.values()), verdicts
    assert len(verdicts) == 3 + 1 + 2 + 1 + 2
    # over a target: each check fails on its own figure
    runs = result["scales"]
    runs[-1]["stages"]["vocab"]["cpu_s"] *= 2  # super-linear
    runs[-1]["near_dup"]["recall"] = 0.9
    runs[-1]["stages"]["corpus"]["chars_per_cpu_s"] = 399_999
    exps = scale.growth(runs)
    failed = {
        t["target"].split(":")[0].split(" at ")[0]
        for t in scale.targets(runs, exps, None)
        if t["pass"] is False
    }
    assert failed == {"vocab", "near-dup recall", "corpus"}


def test_one_scale_gives_no_exponent_and_no_verdict():
    runs = [_run(1, 1_800_000, 3000, 4.0, 400.0, 700.0, None)]
    exps = scale.growth(runs)
    assert all(v is None for stage in exps.values() for v in stage.values())
    assert scale.corpus_memory(runs) is None
    by_name = {t["target"]: t for t in scale.targets(runs, exps, None)}
    assert [t for t in by_name.values() if t["pass"] is not None] == [
        t for t in by_name.values() if "characters per CPU-second" in t["target"]
    ]


# --- the process-tree sampler ------------------------------------------------------------------------------

CHILD = textwrap.dedent(
    """
    import subprocess, sys, time
    def burn(seconds):
        end = time.process_time() + seconds
        while time.process_time() < end:
            pass
    if sys.argv[1] == "child":
        held = b"\\x01" * (40 << 20)          # 40 MB, touched
        # the grandchild is never waited for: it outlives this process, as a Beam worker may
        subprocess.Popen([sys.executable, __file__, "grandchild"])
        burn(0.3)
        time.sleep(0.5)
    else:
        held = b"\\x01" * (120 << 20)         # 120 MB, touched
        burn(0.6)
        time.sleep(0.6)
    """
)


def test_sampler_sees_every_process_of_a_real_tree(tmp_path):
    script = tmp_path / "tree.py"
    script.write_text(CHILD)
    tree = run_measured([sys.executable, str(script), "child"], log_path=str(tmp_path / "log"), interval=0.05)
    assert tree.returncode == 0 and tree.samples > 5
    assert len(tree.workers) == 1  # the grandchild
    assert tree.root.peak_rss >= 40 * MB and tree.root.peak_rss < 120 * MB
    assert tree.max_worker_rss >= 120 * MB
    assert tree.sum_peak_rss >= 160 * MB - 10 * MB  # both alive together at some poll
    # The grandchild was never reaped by its parent: only polling sees its CPU time.
    assert tree.workers[0].cpu_s >= 0.55
    assert tree.polled_cpu_s >= 0.3 + 0.55
    assert tree.rusage_cpu_s >= 0.3 and tree.rusage_cpu_s < tree.polled_cpu_s
    assert tree.cpu_s == max(tree.rusage_cpu_s, tree.polled_cpu_s)


def test_sampler_reports_a_failing_command(tmp_path):
    tree = run_measured(
        [sys.executable, "-c", "print('bye'); raise SystemExit(3)"], log_path=str(tmp_path / "log")
    )
    assert tree.returncode == 3 and (tmp_path / "log").read_text().strip() == "bye"


# --- report -----------------------------------------------------------------------------------------------


def test_table_json_and_plot_are_written(tmp_path):
    from benchmarks.report import write_json

    result = _synthetic_result()
    text = scale.format_table(result)
    lines = text.splitlines()
    assert sum(1 for line in lines if line.startswith(("1x", "4x", "16x"))) == 9
    assert "+10.0 KB peak RSS per added document" in text
    assert "4x..16x, the last step alone" in text and "1x..16x, the least-squares fit" in text
    assert sum(line.lstrip().startswith("PASS") for line in lines) == len(result["targets"])
    write_json(result, str(tmp_path / "scale.json"))
    assert json.loads((tmp_path / "scale.json").read_text()) == json.loads(json.dumps(result))
    scale.write_plot(result, str(tmp_path / "scale.png"))
    assert (tmp_path / "scale.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_stage_commands_are_the_real_cli_with_two_workers(tmp_path):
    cmds = scale.stage_commands(["news2016zh:/a.json", "zhwiki:/b.xml.bz2"], str(tmp_path), 2)
    assert list(cmds) == ["corpus", "vocab", "instances"]
    for stage, cmd in cmds.items():
        assert cmd[:4] == [sys.executable, "-m", "flows.cli", stage]
    beam = ["--direct_running_mode", "multi_processing", "--direct_num_workers", "2"]
    for stage in ("corpus", "instances"):
        assert " ".join(beam) in " ".join(cmds[stage])
    assert cmds["corpus"].count("--source") == 2
    assert cmds["instances"][cmds["instances"].index("--corpus") + 1] == str(tmp_path / "corpus")
    assert cmds["instances"][cmds["instances"].index("--vocab") + 1] == str(tmp_path / "vocab")


def _args(**kw) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    scale.add_arguments(parser)
    args = parser.parse_args([])
    vars(args).update(kw)
    return args


@pytest.mark.parametrize(
    "bad",
    [
        {"scales": "1,x"},
        {"scales": "4,4"},
        {"scales": "0,1"},
        {"workers": 0},
        {"articles": 0},
        {"interval": 0},
    ],
)
def test_bad_options_are_one_line_errors_before_any_work(bad, tmp_path):
    with pytest.raises(UserError):
        scale.run(_args(work=str(tmp_path / "work"), **bad))
    assert not (tmp_path / "work").exists()


def test_a_work_folder_with_files_is_refused(tmp_path):
    (tmp_path / "mine.txt").write_text("not the bench's")
    with pytest.raises(UserError, match="empty or new"):
        scale.run(_args(work=str(tmp_path)))
    assert os.listdir(tmp_path) == ["mine.txt"]


def test_scales_parse_sorted():
    assert scale.parse_scales("16,1,4") == [1, 4, 16]


def test_scale_is_a_target_but_not_in_all(monkeypatch):
    """The long targets (scale: tens of minutes; pretraining-value: hours) run only when named."""
    assert cli.TARGETS["scale"] == "benchmarks.scale"
    assert cli.TARGETS["pretraining-value"] == "benchmarks.pretraining_value"
    ran = []
    monkeypatch.setattr(cli.subprocess, "call", lambda cmd: ran.append(cmd[2]) or 0)
    assert cli.run(argparse.Namespace(target="all", options=[])) == 0
    assert ran == [
        "benchmarks.instances",
        "benchmarks.tokenize",
        "benchmarks.corpus",
        "benchmarks.model",
        "benchmarks.train",
        "benchmarks.parity",
    ]


# --- end to end -------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_end_to_end_at_tiny_scales(tmp_path):
    """`--scales 1,2 --articles 40` through the real commands: every figure present and consistent."""
    out = tmp_path / "scale.json"
    args = _args(scales="1,2", articles=40, work=str(tmp_path / "work"), json=str(out))
    assert scale.run(args) == 0
    result = json.loads(out.read_text())
    assert (tmp_path / "scale.png").exists()
    runs = result["scales"]
    assert [r["copies"] for r in runs] == [1, 2]
    assert runs[1]["characters"] > runs[0]["characters"]
    for r in runs:
        corpus, vocab, inst = (r["stages"][s] for s in scale.STAGES)
        assert corpus["docs_in"] == r["documents"]
        assert 0 < corpus["docs_out"] <= corpus["docs_in"]
        assert vocab["docs_in"] == corpus["docs_out"] and vocab["out_unit"] == "pieces"
        assert 0 < inst["docs_in"] <= corpus["docs_out"] and inst["docs_out"] > 0
        for s in r["stages"].values():
            assert s["cpu_s"] > 0 and s["wall_s"] > 0 and s["output_bytes"] > 0
            assert s["main_peak_rss_mb"] > 20 and s["sum_peak_rss_mb"] >= s["main_peak_rss_mb"]
        # Beam's multi_processing workers are seen for the two Beam stages, none for vocab
        assert corpus["worker_processes"] >= 2 and inst["worker_processes"] >= 2
        assert vocab["worker_processes"] == 0
        assert {"recall", "precision"} <= set(r["near_dup"])
    assert set(result["growth"]) == set(scale.STAGES)
    assert result["corpus_memory"]["kb_per_doc"] is not None
    assert os.path.isdir(tmp_path / "work" / "scale-2x" / "instances")

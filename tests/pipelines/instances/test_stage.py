"""A whole instance run: masking and SOP invariants, the manifest, determinism, Beam flags."""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest

from pipelines.instance_builder import InstanceConfig
from pipelines.instances import run_pipeline
from tests.pipelines.instances.fixtures import CONFIG, RUNNER, check_instance
from tests.pipelines.instances.records import parse_dir


def test_gold_whole_word_masking_never_splits_a_gold_word(gold_run):
    out, manifest = gold_run
    records = parse_dir(out) + parse_dir(out, "eval")
    assert len(records) > 100
    for r in records:
        check_instance(r)  # token_boundary is the gold segmentation here (checked in the tokenizer tests)
    s = manifest["summary"]["train"]
    multi = sum(int(r["token_boundary"][1 : int(r["input_mask"].sum())].sum()) for r in records)
    real = sum(int(r["input_mask"].sum()) for r in records)
    assert multi < 0.8 * real, "gold words are multi-character: fewer word starts than tokens"
    # whole-sentence chunks of 125 tokens from ~40-token sentences: ~80% real tokens (90% at 512)
    assert s["fill_rate"] > 0.75 and 0.14 < s["masked_fraction"] < 0.16


def test_manifest_accounts_for_everything(gold_run):
    _, m = gold_run
    acc = m["summary"]["accounting"]
    assert acc["balanced"] and acc["documents_read"] == 240
    assert set(m["outputs"]) == {
        os.path.basename(p) for p in glob.glob(os.path.join(gold_run[0], "*.tfrecord"))
    }
    assert m["vocab"]["sha256"] and m["inputs"] and m["config"]["whole_word"] == "gold"
    s = m["summary"]["train"]
    assert 0.4 < s["sop_swapped_fraction"] < 0.6
    assert abs(s["mask_kinds"]["mask"] - 0.8) < 0.03


def test_two_runs_are_byte_identical_and_workers_do_not_matter(tmp_path, corpus, vocab_dir):
    from pipelines.instances import resolve_inputs

    inputs = resolve_inputs(None, corpus)
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    ma = run_pipeline(inputs, vocab_dir, a, CONFIG, RUNNER)
    mb = run_pipeline(
        list(reversed(inputs)), vocab_dir, b, CONFIG,
        ["--runner=DirectRunner", "--direct_running_mode=multi_processing", "--direct_num_workers=2"],
    )  # fmt: skip
    assert ma["outputs"] and ma["outputs"] == mb["outputs"], "same files with the same sha256"
    assert open(os.path.join(a, "stats.json")).read() == open(os.path.join(b, "stats.json")).read()


def test_dupe_factor_gives_new_masks_for_the_same_text(tmp_path, corpus, vocab_dir):
    from pipelines.instances import resolve_inputs

    out = str(tmp_path / "d")
    config = InstanceConfig(**{**CONFIG.__dict__, "dupe_factor": 2})
    m = run_pipeline(resolve_inputs(None, corpus), vocab_dir, out, config, RUNNER)
    d0 = sorted(glob.glob(os.path.join(out, "train-*-000.tfrecord")))
    d1 = sorted(glob.glob(os.path.join(out, "train-*-001.tfrecord")))
    assert len(d0) == len(d1) > 0
    assert open(d0[0], "rb").read() != open(d1[0], "rb").read()
    assert m["summary"]["train"]["documents"] == m["summary"]["accounting"]["documents_kept"] - m[
        "summary"
    ].get("eval", {}).get("documents", 0)


def test_dataflow_gets_the_worker_wheel_with_the_instance_stage_dependencies(tmp_path):
    """What would be sent to Dataflow, without contacting GCP."""
    import zipfile

    from core.errors import UserError
    from pipelines.instances import beam_flags

    flags = beam_flags("DataflowRunner", ["--project", "p", "--region", "r", "--temp_location", "gs://b/tmp"])
    wheel = flags[flags.index("--extra_package") + 1]
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        meta = z.read(next(n for n in names if n.endswith("METADATA"))).decode()
    assert "pipelines/instances/pipeline.py" in names and "core/tokenizer.py" in names
    assert not any(n.startswith(("model/", "flows/")) for n in names), "no torch/Prefect code on workers"
    for dep in ("sentencepiece", "rjieba", "google-crc32c"):
        assert f"Requires-Dist: {dep}==" in meta
    with pytest.raises(UserError, match="--temp_location"):
        beam_flags("DataflowRunner", ["--project", "p", "--region", "r"])
    with pytest.raises(UserError, match="--no_such_flag"):
        beam_flags("DirectRunner", ["--no_such_flag", "1"])
    assert "in_memory" in beam_flags("DirectRunner", [])


def test_sop_label_cannot_be_read_off_the_segment_edges(gold_run, vocab_dir):
    """Chunks hold whole sentences, so both segments end at a sentence end whatever the order. (With
    chunk edges inside sentences, 'the first segment ends with 。' predicted 89% of the labels.)"""
    from core.tokenizer import Tokenizer

    tok = Tokenizer.load(vocab_dir)
    final = [tok.sp.piece_to_id(p) for p in "。！？"]
    out, _ = gold_run
    hits = []
    for r in parse_dir(out) + parse_dir(out, "eval"):
        ids = r["input_ids"].copy()
        k = int(r["masked_lm_weights"].sum())
        ids[r["masked_lm_positions"][:k]] = r["masked_lm_ids"][:k]  # the text as it was
        first_sep = int(np.flatnonzero(ids == tok.sep_id)[0])
        ends_sentence = ids[first_sep - 1] in final
        hits.append(ends_sentence == (r["next_sentence_labels"][0] == 0))
    n = len(hits)
    assert n > 300 and abs(np.mean(hits) - 0.5) < 4 * np.sqrt(0.25 / n)  # chance: no shortcut


def test_a_run_imports_neither_tensorflow_nor_torch(tmp_path, corpus, vocab_dir):
    """The stage writes TFRecords with its own framing: TensorFlow (seconds to import, ~1 GB) and torch
    must not be part of its fixed cost, in the driver or in the in-memory workers."""
    import json
    import subprocess
    import sys

    script = (
        "import contextlib, io, json, sys\n"
        "from flows.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    code = main(sys.argv[1:])\n"
        "print(json.dumps([code, sorted({'tensorflow', 'torch', 'prefect'} & set(sys.modules))]))\n"
    )
    argv = ["instances", "--corpus", corpus, "--vocab", vocab_dir, "--out", str(tmp_path / "o"),
            "--max-seq-length", "128", "--max-predictions", "20"]  # fmt: skip
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    out = subprocess.run(
        [sys.executable, "-c", script, *argv], capture_output=True, text=True, env=env, cwd=root
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [0, []]

"""The instance pipeline through a real Beam runner: output schema, invariants, determinism, bad input."""

from __future__ import annotations

import glob
import gzip
import json
import os

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from flows.cli import main as albert
from pipelines.core.manifest import write_manifest
from pipelines.core.tfrecord import read_records
from pipelines.instance_builder import InstanceConfig, split_of
from pipelines.instances import CreateInstances, ReadGroups, run_pipeline
from pipelines.masking import MaskingConfig
from pipelines.packing import PackingConfig
from pipelines.schema import tf_parse_spec

tf = pytest.importorskip("tensorflow")
L, P = 128, 20
CONFIG = InstanceConfig(
    packing=PackingConfig(L), masking=MaskingConfig(max_predictions=P), group_chars=20_000
)
RUNNER = ["--runner=DirectRunner", "--direct_running_mode=in_memory"]


def write_corpus(folder, docs, shards=3):
    os.makedirs(folder, exist_ok=True)
    for k in range(shards):
        with gzip.open(
            os.path.join(folder, f"docs-{k:05d}-of-{shards:05d}.jsonl.gz"), "wt", encoding="utf-8"
        ) as f:
            for d in docs[k::shards]:
                f.write(json.dumps(d, ensure_ascii=False) + "\n")
    write_manifest(str(folder), "corpus", counts={"documents": len(docs)})
    return str(folder)


def parse_dir(out, split="train"):
    spec = tf_parse_spec(L, P)
    records = []
    for path in sorted(glob.glob(os.path.join(out, f"{split}-*.tfrecord"))):
        for raw in read_records(open(path, "rb").read()):
            records.append({k: v.numpy() for k, v in tf.io.parse_single_example(raw, spec).items()})
    return records


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, sample_docs):
    return write_corpus(tmp_path_factory.mktemp("corpus"), sample_docs)


@pytest.fixture(scope="module")
def gold_run(tmp_path_factory, corpus, vocab_dir):
    from pipelines.instances import resolve_inputs

    out = str(tmp_path_factory.mktemp("gold"))
    config = InstanceConfig(**{**CONFIG.__dict__, "whole_word": "gold"})
    manifest = run_pipeline(resolve_inputs(None, corpus), vocab_dir, out, config, RUNNER)
    return out, manifest


def test_read_groups_splits_groups_and_dead_letters(tmp_path, sample_docs, vocab_dir):
    docs = sample_docs[:30] + [
        {"id": "bad", "sentences": "not a list"},
        {"id": "empty", "sentences": ["  ", ""]},
    ]
    path = write_corpus(tmp_path / "c", docs, shards=1)
    path = glob.glob(os.path.join(path, "docs-*.jsonl.gz"))[0]
    with TestPipeline(argv=RUNNER) as p:
        out = (
            p
            | beam.Create([(0, "jsonl", path)])
            | beam.ParDo(
                ReadGroups(CONFIG, str(tmp_path), os.path.join(vocab_dir, "spm.model"))
            ).with_outputs("read", main="groups")
        )
        docs_per_split = out.groups | beam.FlatMap(lambda g: [(g.split, d.id) for d in g.docs])
        expected = [(split_of(d["id"], CONFIG.eval_fraction), d["id"]) for d in sample_docs[:30]]
        assert_that(docs_per_split, equal_to(expected), label="kept")
        read_stats = [{"documents_read": 32, "skipped": {"malformed_document": 1, "empty": 1}}]
        assert_that(out.read, equal_to(read_stats), label="read")
    dead = [json.loads(x) for x in gzip.open(tmp_path / "skipped-00000.jsonl.gz", "rt")]
    assert [(r["id"], r["reason"]) for r in dead] == [("bad", "malformed_document"), ("empty", "empty")]
    assert dead[0]["raw"] and dead[0]["where"].endswith(":31")


def test_create_instances_writes_valid_records(tmp_path, corpus, vocab_dir):
    from pipelines.instances import resolve_inputs

    out = str(tmp_path / "out")
    os.makedirs(out)

    def one_split_per_file(stats):
        assert stats and all(len(s) == 1 and next(iter(s)) in ("train", "eval") for s in stats)

    with TestPipeline(argv=RUNNER) as p:
        stats = (
            p
            | beam.Create(resolve_inputs(None, corpus))
            | CreateInstances(f"{vocab_dir}/spm.model", out, CONFIG)
        )
        assert_that(stats, one_split_per_file)
    records = parse_dir(out)
    assert len(records) > 50
    stats = json.load(open(os.path.join(out, "stats.json")))
    assert stats["train"]["instances"] == len(records)
    for r in records:
        check_instance(r)


def check_instance(r):
    ids, mask, seg, tb = r["input_ids"], r["input_mask"], r["segment_ids"], r["token_boundary"]
    n = int(mask.sum())
    assert np.all(mask[:n] == 1) and np.all(mask[n:] == 0) and np.all(ids[n:] == 0)
    seps = np.flatnonzero(ids[:n] == 3)
    assert ids[0] == 2 and len(seps) == 2 and seps[1] == n - 1, "[CLS] A [SEP] B [SEP]"
    assert np.all(seg[: seps[0] + 1] == 0) and np.all(seg[seps[0] + 1 : n] == 1) and np.all(seg[n:] == 0)
    assert tb[0] == 1 and tb[seps].all() and np.all(tb[n:] == 0)
    k = int(r["masked_lm_weights"].sum())
    pos = r["masked_lm_positions"][:k]
    assert np.all(r["masked_lm_weights"][:k] == 1.0) and np.all(r["masked_lm_weights"][k:] == 0.0)
    assert np.all(np.diff(pos) > 0) and np.all(pos < n) and not np.isin(pos, [0, *seps]).any()
    assert np.all(r["masked_lm_positions"][k:] == 0) and np.all(r["masked_lm_ids"][k:] == 0)
    assert k <= min(P, max(1, round(n * 0.15)))
    assert r["next_sentence_labels"][0] in (0, 1)
    # whole words: every word (a run from one token_boundary to the next) is masked entirely or not at all
    masked = np.zeros(len(ids), dtype=bool)
    masked[pos] = True
    starts = [i for i in range(1, n) if tb[i]] + [n]
    for a, b in zip(starts[:-1], starts[1:]):
        assert masked[a:b].all() or not masked[a:b].any()


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


def test_cli_on_bad_input_counts_every_reason(tmp_path, vocab_dir, capsys):
    long_sentence = "中国人民" * 200  # far longer than a 128-token sequence
    text = (
        "第一句话。\n第二句话。\n\n"  # fine
        "\n\n\n"  # empty documents
        "只有一句话。\n\n"  # one-sentence document: packed as filler
        f"{long_sentence}\n这是长句之后的一句。\n\n"
        "控制\x07字符\x00在这里。\n正常的一句。\n\n"
    )
    path = tmp_path / "in.txt"
    path.write_bytes(
        text.encode("utf-8")
        + b"\xff one broken byte in a long line of valid text\n"
        + "这是后面的另一句话，它很长。\n\n".encode()
    )
    bad = tmp_path / "garbage.txt"
    bad.write_bytes(b"\xff\xfe\xfd\xfc\xfb\xfa\n\xf0\xf1\n\n")
    out = str(tmp_path / "out")
    code = albert(["instances", "--text", str(path), "--text", str(bad), "--vocab", vocab_dir, "--out", out,
                   "--max-seq-length", "128", "--max-predictions", "20", "--eval-fraction", "0",
                   "--max-dead-letter-fraction", "0.5",  # 1 of 6 documents is broken on purpose
                   "--runner=DirectRunner", "--direct_running_mode=in_memory"])  # fmt: skip
    assert code == 0
    m = json.load(open(os.path.join(out, "manifest.json")))
    assert m["counts"]["skipped"] == {"invalid_utf8": 1}
    notes = m["counts"]["train"]["notes"]
    assert notes["control_chars_removed"] == 2
    assert notes["invalid_utf8_repaired_docs"] == 1
    assert notes["one_sentence_docs_packed_as_filler"] == 1
    assert m["counts"]["train"]["sentences_split_across_sequences"] >= 1
    assert m["summary"]["accounting"]["balanced"]
    skipped = [json.loads(x) for x in gzip.open(os.path.join(out, "skipped-00000.jsonl.gz"), "rt")]
    assert [s["reason"] for s in skipped] == ["invalid_utf8"]
    for r in parse_dir(out):
        check_instance(r)
    assert "fill" in capsys.readouterr().out


def test_cli_errors_are_one_line(tmp_path, vocab_dir, capsys):
    assert albert(["instances", "--vocab", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "spm.model" in err
    assert (
        albert(["instances", "--vocab", vocab_dir, "--out", str(tmp_path / "o"), "--dupe-factor", "0"]) == 2
    )
    assert "dupe_factor" in capsys.readouterr().err


def test_dataflow_gets_the_worker_wheel_with_the_instance_stage_dependencies(tmp_path):
    """What would be sent to Dataflow, without contacting GCP."""
    import zipfile

    from pipelines.core.errors import UserError
    from pipelines.instances import beam_flags

    flags = beam_flags("DataflowRunner", ["--project", "p", "--region", "r", "--temp_location", "gs://b/tmp"])
    wheel = flags[flags.index("--extra_package") + 1]
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        meta = z.read(next(n for n in names if n.endswith("METADATA"))).decode()
    assert "pipelines/instances/pipeline.py" in names and "pipelines/tokenizer.py" in names
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
    from pipelines.tokenizer import Tokenizer

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

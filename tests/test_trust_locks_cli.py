"""One writer per folder, no write through a link, and the folders that cannot be written, as a user
meets them (docs/trust.md): real `albert` processes on one folder, real locks (flock; a bucket lock
on the GCS emulator), real kill -9, real symlinks, a real read-only tmpfs."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time

import pytest

from core import lock
from tests.cli import ROOT, albert, tree
from tests.lock_holder import hold, kill9
from tests.model import train_fixtures
from tests.model.train_fixtures import cli_args
from tests.trainer_hooks import launcher

HOST = lock.HOST
instances_dir, model_config_file = train_fixtures.instances_dir, train_fixtures.model_config_file  # fixtures


def wait_for(path: str, proc: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.time() + timeout
    while not os.path.exists(path):
        assert proc.poll() is None, proc.stderr.read()
        assert time.time() < deadline, f"{path} did not appear"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def trained(tmp_path_factory, instances_dir, model_config_file) -> str:
    """A real checkpoint folder of `albert pretrain` (2 steps)."""
    run = str(tmp_path_factory.mktemp("trained") / "run")
    albert(*cli_args(instances_dir, run, model_config_file, "--steps", "2", "--save-every", "2")).ok()
    return os.path.join(run, "checkpoints", "step-2")


# ------------------------------------------------------------------------------ one writer per folder


@pytest.mark.slow
def test_a_second_pretrain_on_the_same_out_is_refused_and_a_killed_one_never_blocks_the_rerun(
    tmp_path, instances_dir, model_config_file
):
    out = str(tmp_path / "run")
    args = cli_args(
        instances_dir, out, model_config_file, "--steps", "4", "--save-every", "2", "--num-workers", "1"
    )
    # The first run sleeps after step 2 (saved), its loader worker (a forked process) alive beside it.
    first = subprocess.Popen(
        [sys.executable, *launcher(sleep=(2, 600)), *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": ROOT},
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(os.path.join(out, "checkpoints", "step-2", "checksums.json"), first)
        before = tree(out)
        second = albert(*cli_args(instances_dir, out, model_config_file, "--steps", "4", "--lr", "5e-3"))
        second.fails(
            2,
            f"--out {out} is in use by another `albert pretrain` (host {HOST}, pid {first.pid}, since ",
            "wait for it to finish, or stop it",
        )
        assert tree(out) == before  # nothing of the first run's touched
    finally:
        kill9(first)
    rerun = albert(*args)
    rerun.ok()
    assert (
        f"warning: --out {out}: taking over the lock of pid {first.pid} on {HOST} (no longer running)"
        in rerun.err
    )
    assert "resumed from" in rerun.err and os.path.isdir(os.path.join(out, "checkpoints", "step-4"))
    assert not os.path.exists(os.path.join(out, lock.NAME))  # released at the end


@pytest.mark.parametrize("command", ["vocab", "corpus", "export", "promote"])
def test_a_command_is_refused_while_another_process_writes_its_folder(command, tmp_path, trained):
    out = str(tmp_path / "out")
    args = {
        "vocab": ["vocab", "--out", out],
        "corpus": ["corpus", "--source", "peoples-daily:", "--out", out],
        "export": ["export", "--checkpoint", trained, "--format", "hf", "--out", out],
        "promote": ["promote", "--registry", out, "--rollback"],
    }[command]
    folder = os.path.join(out, "albert") if command == "promote" else out
    holder = hold(folder, command)  # as a second terminal, or a retried task, meets the first
    try:
        before = tree(out)
        r = albert(*args)
        what = f"--registry {out} (model albert)" if command == "promote" else f"--out {out}"
        r.fails(2, f"{what} is in use by another `albert {command}` (host {HOST}, pid {holder.pid}, since ")
        assert tree(out) == before
    finally:
        kill9(holder)
    if command == "export":  # and once the holder is gone, the command runs
        r = albert(*args).ok()
        assert f"taking over the lock of pid {holder.pid} on {HOST} (no longer running)" in r.err
        assert os.path.isfile(os.path.join(out, "checksums.json")) and lock.NAME not in os.listdir(out)


def test_a_bucket_folder_is_locked_by_an_object_with_a_lease(bucket):
    from core import storage

    out = f"{bucket}/vocab"
    holder = hold(out, "vocab")  # this host: a lease of 120 s, renewed every 40 s
    try:
        albert("vocab", "--out", out).fails(
            2, f"--out {out} is in use by another `albert vocab` (host {HOST}, pid {holder.pid}"
        )
    finally:
        kill9(holder)
    r = albert("vocab", "--out", out).ok()  # at once, lease or not: its holder ran here and is gone
    assert f"taking over the lock of pid {holder.pid} on {HOST} (no longer running)" in r.err
    assert lock.NAME not in storage.listdir(out)  # released: the object is deleted

    other = lock.Holder("other-host", 4242, "vocab", "2026-01-01T00:00:00Z", time.time(), 120.0)
    storage.write_bytes(storage.join(out, lock.NAME), other.dumps())
    albert("vocab", "--out", out).fails(2, "is in use by another `albert vocab` (host other-host, pid 4242")
    other.renewed -= 1000  # its holder stopped renewing 1000 s ago
    storage.write_bytes(storage.join(out, lock.NAME), other.dumps())
    r = albert("vocab", "--out", out).ok()
    assert "taking over the lock of pid 4242 on other-host (its lease of 120 s ran out" in r.err


# -------------------------------------------------------------------------------- no write via links


@pytest.mark.parametrize("where", ["same", "inside", "parent"])
def test_export_through_a_link_never_writes_into_the_checkpoint(where, tmp_path, trained):
    from model.checkpoint import verify

    ckpt = shutil.copytree(trained, str(tmp_path / "run" / "step-2"))
    target = {"same": ckpt, "inside": os.path.join(ckpt, "hf"), "parent": os.path.dirname(ckpt)}[where]
    link = str(tmp_path / "link")
    os.symlink(target, link)
    before = tree(str(tmp_path / "run"))
    r = albert("export", "--checkpoint", ckpt, "--format", "hf", "--out", link, "--force")
    relation = {"same": "is", "inside": "is inside", "parent": "holds"}[where]
    r.fails(
        2,
        f"--out {link} {relation} the checkpoint folder {ckpt}",
        f"{link} is {target}",
        "give an --out outside it",
    )
    assert tree(str(tmp_path / "run")) == before
    verify(ckpt)  # still complete: it can be resumed and verified


def test_report_and_run_folders_through_a_link_are_refused(
    tmp_path, trained, instances_dir, model_config_file
):
    ckpt = shutil.copytree(trained, str(tmp_path / "ckpt"))
    weights = str(tmp_path / "weights.json")
    os.symlink(os.path.join(ckpt, "model.safetensors"), weights)
    before = tree(ckpt)
    r = albert("evaluate", "--checkpoint", ckpt, "--instances", instances_dir, "--out", weights, "--force")
    r.fails(2, f"--out {weights} is inside the checkpoint folder {ckpt}")
    assert tree(ckpt) == before
    runs = str(tmp_path / "runs")
    os.symlink(instances_dir, runs)
    before = tree(instances_dir)
    r = albert(
        *cli_args(instances_dir, os.path.join(runs, "r1"), model_config_file, "--steps", "2", "--force")
    )
    r.fails(2, f"--out {runs}/r1 is inside the input --instances {instances_dir}")
    assert tree(instances_dir) == before


def test_corpus_and_vocab_never_write_into_their_sources(tmp_path):
    src = tmp_path / "texts"
    src.mkdir()
    (src / "a.txt").write_text("第一句。\n第二句。\n\n第三句。\n", encoding="utf-8")
    link = str(tmp_path / "out")
    os.symlink(str(src), link)
    r = albert("corpus", "--source", f"text:{src}/a.txt", "--out", link, "--force")
    r.fails(2, f"--out {link} holds the input --source {src}/a.txt", f"{link} is {src}")
    r = albert("vocab", "--text", str(src / "a.txt"), "--out", link, "--force")
    r.fails(2, f"--out {link} holds the input --text {src}/a.txt")
    assert sorted(os.listdir(src)) == ["a.txt"]


# ------------------------------------------------------------- folders that cannot be written at all


@contextlib.contextmanager
def read_only_tmpfs(folder: str, fill=None):
    """A tmpfs at `folder` (filled by `fill(folder)`), remounted read-only; skips where mounting is
    not allowed."""
    os.makedirs(folder)
    if subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", folder], capture_output=True
    ).returncode:
        pytest.skip("mounting a tmpfs is not allowed here")
    try:
        if fill:
            fill(folder)
        subprocess.run(["mount", "-o", "remount,ro", folder], check=True)
        yield folder
    finally:
        subprocess.run(["umount", folder], check=True)


def test_a_read_only_file_system_and_a_symlink_loop_are_named(tmp_path, trained):
    loop = str(tmp_path / "loop")
    os.symlink("loop", loop)
    albert("vocab", "--out", loop).fails(2, f"cannot write to --out {loop}: symlink loop at {loop}")
    albert("vocab", "--out", f"{loop}/v").fails(2, "symlink loop")
    nowhere = str(tmp_path / "nowhere")
    os.symlink(str(tmp_path / "gone"), nowhere)
    albert("vocab", "--out", nowhere).fails(
        2, f"{nowhere} is a link to {tmp_path / 'gone'}, which does not exist"
    )
    with read_only_tmpfs(str(tmp_path / "ro")) as ro:
        r = albert("export", "--checkpoint", trained, "--format", "hf", "--out", f"{ro}/hf")
        r.fails(
            2,
            f"cannot write to --out {ro}/hf: read-only file system",
            "give a folder on a writable file system",
        )
    earlier = lambda d: shutil.copytree(trained, os.path.join(d, "hf"))  # noqa: E731
    with read_only_tmpfs(str(tmp_path / "ro2"), earlier) as ro:
        before = tree(ro)
        r = albert("export", "--checkpoint", trained, "--format", "hf", "--out", f"{ro}/hf", "--force")
        r.fails(2, f"cannot write to --out {ro}/hf: read-only file system")
        assert tree(ro) == before

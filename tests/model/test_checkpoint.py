"""Checkpoints: complete or absent, verified on load, pruned, fsspec-capable, and a run killed with
SIGKILL resumes to exactly the parameters of an uninterrupted run."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch

from model import checkpoint as ckpt
from model.trainer import Trainer, train
from tests.model.train_fixtures import cli_args, train_config
from tests.trainer_hooks import launcher

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_save_load_round_trip_restores_everything(tmp_path, instances_dir, model_config_file):
    from model.convert import load_pretrained

    out = str(tmp_path / "run")
    cfg = train_config(instances_dir, out, model_config_file, steps=3, save_every=3)
    first = Trainer(cfg)
    first.fit()
    path = ckpt.latest(out)
    assert path.endswith("step-3")
    assert sorted(os.listdir(path)) == sorted(
        ["checksums.json", "config.json", "model.safetensors", "optimizer.json", "optimizer.safetensors",
         "rng.safetensors", "spm.model", "trainer.json"]
    )  # fmt: skip
    state = json.load(open(os.path.join(path, "trainer.json")))
    assert state["step"] == 3 and state["ranks"][0]["data"]["next_batch"] == 3
    assert not any(n.endswith(".pkl") or n.endswith(".pt") for n in os.listdir(path))  # no pickle

    resumed = Trainer(cfg)  # a new process would do exactly this
    assert resumed.step == 3 and resumed.resumed_from == path
    for a, b in zip(first.model.parameters(), resumed.model.parameters()):
        assert torch.equal(a, b)
    sa, sb = first.optimizer.state_dict(), resumed.optimizer.state_dict()
    for k in sa["state"]:
        for slot in sa["state"][k]:
            assert torch.equal(sa["state"][k][slot], sb["state"][k][slot])
    assert resumed.position == first.position
    assert torch.equal(torch.get_rng_state(), ckpt.load(path).rng_tensors["torch_cpu@0"])

    model = load_pretrained(path)  # the model part is a plain checkpoint folder
    for (n, a), b in zip(first.model.named_parameters(), model.parameters()):
        assert torch.equal(a, b), n


def _fake_save(run_dir, step, value=1.0, keep=3):
    return ckpt.save(
        run_dir,
        step,
        config_json={"model_type": "albert"},
        model_tensors={"w": torch.full((3,), value)},
        optimizer_tensors={"w::exp_avg": torch.zeros(3)},
        optimizer_json={"class": "Lamb"},
        trainer_json={"step": step},
        rng_tensors={"torch_cpu@0": torch.get_rng_state()},
        keep=keep,
    )


def test_corrupt_or_partial_checkpoints_are_skipped(tmp_path):
    run = str(tmp_path / "run")
    for step in (2, 4, 6):
        _fake_save(run, step)
    assert ckpt.latest(run).endswith("step-6")
    with open(os.path.join(run, "checkpoints/step-6/model.safetensors"), "r+b") as f:
        f.seek(-2, os.SEEK_END)
        f.write(b"\x00\x01")  # bit rot in the last checkpoint
    with pytest.raises(ckpt.CheckpointError, match="model.safetensors does not match its sha256"):
        ckpt.load(os.path.join(run, "checkpoints/step-6"))
    assert ckpt.latest(run).endswith("step-4")
    os.remove(os.path.join(run, "checkpoints/step-4/optimizer.json"))
    assert ckpt.latest(run).endswith("step-2")
    # A folder without checksums.json (a copy interrupted half-way) is never a checkpoint.
    shutil.copytree(os.path.join(run, "checkpoints/step-2"), os.path.join(run, "checkpoints/step-9"))
    os.remove(os.path.join(run, "checkpoints/step-9/checksums.json"))
    assert ckpt.list_steps(run) == [2, 4, 6] and ckpt.latest(run).endswith("step-2")


def test_last_n_are_kept_and_stale_temporaries_removed(tmp_path):
    run = str(tmp_path / "run")
    os.makedirs(os.path.join(run, "checkpoints/.step-1.tmp-deadbeef"))  # a crashed writer's leftovers
    for step in range(1, 6):
        _fake_save(run, step, keep=2)
    assert sorted(os.listdir(os.path.join(run, "checkpoints"))) == ["step-4", "step-5"]


def test_non_finite_weights_are_never_written(tmp_path):
    with pytest.raises(ckpt.CheckpointError, match="non-finite weights: w"):
        _fake_save(str(tmp_path / "run"), 1, value=float("nan"))
    assert ckpt.list_steps(str(tmp_path / "run")) == []


def test_fsspec_urls(tmp_path):
    import fsspec

    run = f"memory://ckpt-test-{os.getpid()}/run"
    for step in (1, 2):
        _fake_save(run, step, value=float(step))
    fs = fsspec.filesystem("memory")
    assert fs.exists(f"/ckpt-test-{os.getpid()}/run/checkpoints/step-2/checksums.json")
    assert ckpt.latest(run) == f"{run}/checkpoints/step-2"
    assert torch.equal(ckpt.load(ckpt.latest(run)).model_tensors["w"], torch.full((3,), 2.0))


def _run_cli(args: list[str], env: dict, entry: tuple[str, ...] = ("-m", "flows.cli")) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, *entry, *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_sigkill_mid_run_then_same_command_resumes_to_identical_weights(
    tmp_path, instances_dir, model_config_file
):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": ROOT}
    # Dropout on: the resumed run must also restore the RNG state to match.
    extra = ("--steps", "10", "--save-every", "4", "--num-workers", "1", "--set", "hidden_dropout_prob=0.1")

    # Uninterrupted reference run.
    ref_dir = str(tmp_path / "reference")
    ref = _run_cli(cli_args(instances_dir, ref_dir, model_config_file, *extra), env)
    out, _ = ref.communicate(timeout=300)
    assert ref.returncode == 0, out

    # The same command; it pauses after step 6 (2 steps past the step-4 checkpoint) and is killed there.
    run_dir = str(tmp_path / "killed")
    args = cli_args(instances_dir, run_dir, model_config_file, *extra)
    proc = _run_cli(args, env, launcher(sleep=(6, 120)))
    metrics = os.path.join(run_dir, "metrics.jsonl")
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None:
        logged = open(metrics).read() if os.path.exists(metrics) else ""
        if '"step": 6,' in logged:
            break
        time.sleep(0.2)
    assert proc.poll() is None, proc.communicate()[0]
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert ckpt.list_steps(run_dir) == [4]  # killed after the first checkpoint, before the end

    again = _run_cli(args, env)
    out, _ = again.communicate(timeout=300)
    assert again.returncode == 0, out
    assert "resumed from" in out and "step-4" in out
    final_ref = os.path.join(ckpt.latest(ref_dir), "model.safetensors")
    final = os.path.join(ckpt.latest(run_dir), "model.safetensors")
    assert final.endswith("step-10/model.safetensors")
    assert open(final, "rb").read() == open(final_ref, "rb").read()  # bit-exact
    assert (
        open(final.replace("model.", "optimizer."), "rb").read()
        == open(final_ref.replace("model.", "optimizer."), "rb").read()
    )
    # metrics.jsonl holds each step once: what the killed run logged after step 4 was dropped.
    steps = [json.loads(x)["step"] for x in open(metrics) if json.loads(x)["kind"] == "train"]
    assert steps == [2, 4, 6, 8, 10]


def test_resume_in_process_equals_uninterrupted(tmp_path, instances_dir, model_config_file):
    """In one process: a copy of a finished run with its last checkpoints removed continues from
    step-3 to the same weights."""
    full = str(tmp_path / "full")
    train(train_config(instances_dir, full, model_config_file, steps=8, save_every=3, keep_last=5))
    part = str(tmp_path / "part")
    shutil.copytree(full, part)
    for s in (6, 8):
        shutil.rmtree(os.path.join(part, f"checkpoints/step-{s}"))
    train(train_config(instances_dir, part, model_config_file, steps=8, save_every=3, keep_last=5))
    a = ckpt.load(ckpt.latest(full)).model_tensors
    b = ckpt.load(ckpt.latest(part)).model_tensors
    assert all(torch.equal(a[k], b[k]) for k in a)


# Slow: the fast suite keeps the local SIGKILL-and-resume test (above).
@pytest.mark.slow
def test_on_gcs_a_killed_run_resumes_from_the_bucket_to_identical_weights(
    tmp_path, instances_dir, model_config_file, bucket
):
    """Instances streamed from gs://, checkpoints and logs written there; SIGKILL after step 6; the same
    command resumes from the bucket's step-4 and ends bit-identical to an uninterrupted local run."""
    from core import storage

    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": ROOT}
    extra = ("--steps", "10", "--save-every", "4", "--num-workers", "1", "--set", "hidden_dropout_prob=0.1")
    remote_instances = f"{bucket}/instances"
    storage.put_dir(instances_dir, remote_instances)
    ref_dir = str(tmp_path / "reference")
    ref = _run_cli(cli_args(instances_dir, ref_dir, model_config_file, *extra), env)
    assert ref.wait(300) == 0, ref.communicate()[0]

    run = f"{bucket}/runs/killed"
    args = cli_args(remote_instances, run, model_config_file, *extra)
    proc = _run_cli(args, env, launcher(sleep=(6, 120)))
    seen = []
    for line in proc.stdout:  # the progress lines; the run pauses after step 6
        seen.append(line)
        if "step 6/10" in line:
            break
    assert proc.poll() is None, "".join(seen)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    assert ckpt.list_steps(run) == [4]  # complete in the bucket; nothing after it

    again = _run_cli(args, env)
    out, _ = again.communicate(timeout=300)
    assert again.returncode == 0, out
    assert "resumed from" in out and "step-4" in out
    final = ckpt.latest(run)
    assert final == f"{run}/checkpoints/step-10"
    for name in ("model.safetensors", "optimizer.safetensors"):
        reference = open(os.path.join(ckpt.latest(ref_dir), name), "rb").read()
        assert storage.read_bytes(f"{final}/{name}") == reference, name  # bit-exact
    metrics = [json.loads(x) for x in storage.read_text(f"{run}/metrics.jsonl").splitlines()]
    assert [m["step"] for m in metrics if m["kind"] == "train"] == [2, 4, 6, 8, 10]
    assert storage.isfile(f"{run}/curves.png") and storage.listdir(f"{run}/tb")


def test_on_gcs_a_step_folder_without_checksums_is_not_a_checkpoint(bucket):
    run = f"{bucket}/run"
    _fake_save(run, 1, value=1.0)
    from core import storage

    storage.write_bytes(f"{run}/checkpoints/step-2/model.safetensors", b"half written")  # a writer died
    assert ckpt.list_steps(run) == [1] and ckpt.latest(run) == f"{run}/checkpoints/step-1"
    storage.remove(f"{run}/checkpoints/step-1/checksums.json")
    assert ckpt.latest(run) is None

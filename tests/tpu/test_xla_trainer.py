"""The trainer on XLA (`--device tpu`) on XLA's CPU device, which traces, compiles and runs the lazy
graphs a TPU would (docs/tpu.md):

- the step compiles on the first steps only, then replays its graphs (torch_xla's CompileTime count);
- `albert pretrain --device tpu` trains, evaluates and saves, as a user runs it;
- checkpoints cross between XLA and the eager CPU trainer both ways (the same files, the same tensors);
- a run killed (SIGKILL, no checkpoint of the step in flight; dropout on) resumes to the bytes of an
  uninterrupted XLA run;
- `albert evaluate` on XLA reports what it reports on the CPU (bf16 aside);
- two XLA processes (torchrun) train as one job: the weights of one process on the same global batch.

`pytest -s` prints the figures (compilations per step, tokens per second)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("torch_xla")

import torch  # noqa: E402

from model import checkpoint as ckpt  # noqa: E402
from model.tpu import compilations, rng_state  # noqa: E402
from model.trainer import Trainer  # noqa: E402
from tests.model.train_fixtures import ROOT, cli_args, finished, start_group, train_config  # noqa: E402
from tests.trainer_hooks import launcher  # noqa: E402

ENV = {**os.environ, "PJRT_DEVICE": "CPU", "PYTHONPATH": ROOT}
TPU = ("--device", "tpu")  # after cli_args' --device cpu: the last one counts


def run_steps(trainer: Trainer, n: int) -> list[dict]:
    """`n` steps of the trainer's loop body (no logging, no saving): their metrics."""
    batches, out = trainer._batches(), []
    for _ in range(n):
        out.append(trainer.train_step(trainer._next_micro_batches(batches)))
        trainer.step += 1
    return out


def cpu_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().cpu() for k, v in model.state_dict().items()}


def assert_same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


def test_the_step_compiles_on_the_first_steps_only(tmp_path, instances_dir, model_config_file):
    steps, settled = 12, 3
    cfg = train_config(instances_dir, str(tmp_path / "run"), model_config_file, device="tpu", steps=steps)
    trainer = Trainer(cfg)
    assert trainer.device.type == "xla" and trainer.precision == "bf16"  # auto: bf16 autocast on XLA
    assert (
        rng_state() == cfg.training.seed
    )  # dropout on the device drawn from --seed (model.device.manual_seed)
    # the decoder still IS the word embedding on the device (model.device.to_device)
    assert trainer.model.predictions.decoder.weight is trainer.model.albert.embeddings.word_embeddings.weight
    batches, counts, tokens = trainer._batches(), [], 0.0
    before = compilations()
    for i in range(steps):
        if i == settled:
            started, tokens = time.monotonic(), 0.0
        metrics = trainer.train_step(trainer._next_micro_batches(batches))
        trainer.step += 1
        assert metrics["finite"] and metrics["loss"] > 0
        tokens += metrics["tokens"]
        counts.append(compilations() - before)
    seconds = time.monotonic() - started
    print(
        f"\nXLA compilations after each step: {counts}; {tokens / seconds:.0f} tokens/s after step {settled}"
    )
    assert counts[0] >= 2  # the step's two graphs: forward+backward+clip, and the update
    assert counts[settled - 1 :] == [counts[settled - 1]] * (steps - settled + 1)  # none after


def test_albert_pretrain_runs_on_xla(tmp_path, instances_dir, model_config_file):
    run_dir = str(tmp_path / "run")
    args = cli_args(instances_dir, run_dir, model_config_file, "--steps", "4", *TPU)
    err = finished(start_group([sys.executable, "-m", "flows.cli", *args], ENV, stderr=subprocess.STDOUT))
    assert "xla:0 bf16" in err, err[-3000:]
    assert "eval step 4" in err, err[-3000:]
    assert ckpt.latest(run_dir).endswith("step-4")


@pytest.mark.parametrize("first, then", [("tpu", "cpu"), ("cpu", "tpu")], ids=["xla-to-cpu", "cpu-to-xla"])
def test_a_checkpoint_crosses_between_xla_and_cpu(tmp_path, instances_dir, model_config_file, first, then):
    out = str(tmp_path / "run")
    writer = Trainer(train_config(instances_dir, out, model_config_file, device=first, steps=6))
    run_steps(writer, 3)
    path = writer.save()
    assert path.endswith("step-3")

    reader = Trainer(train_config(instances_dir, out, model_config_file, device=then, steps=6))
    assert reader.resumed_from == path and reader.step == 3
    assert reader.device.type == ("xla" if then == "tpu" else "cpu")
    assert_same_weights(cpu_state(writer.model), cpu_state(reader.model))
    written, read = writer.optimizer.state_dict()["state"], reader.optimizer.state_dict()["state"]
    for k in written:
        for slot in written[k]:
            assert torch.equal(torch.as_tensor(written[k][slot]).cpu(), torch.as_tensor(read[k][slot]).cpu())
    assert reader.position == writer.position
    summary = reader.fit()  # and trains on from there
    assert summary["step"] == 6 and summary["skipped_steps"] == 0


def final_files(run_dir: str, step: int) -> dict[str, bytes]:
    path = ckpt.latest(run_dir)
    assert path.endswith(f"step-{step}"), path
    return {
        n: open(os.path.join(path, n), "rb").read() for n in ("model.safetensors", "optimizer.safetensors")
    }


def test_a_killed_xla_run_resumes_to_the_uninterrupted_weights(tmp_path, instances_dir, model_config_file):
    steps, pause = 8, 6  # checkpoints at 4 and 8; the kill comes after step 6, so the rerun redoes 5-8
    # dropout on: the resume must restore XLA's own generator (torch's CPU one does not drive it)
    extra = ("--steps", str(steps), "--save-every", "4", "--set", "hidden_dropout_prob=0.1", *TPU)
    reference = str(tmp_path / "reference")
    finished(
        start_group(
            [
                sys.executable,
                "-m",
                "flows.cli",
                *cli_args(instances_dir, reference, model_config_file, *extra),
            ],
            ENV,
        )
    )

    run_dir = str(tmp_path / "run")
    args = cli_args(instances_dir, run_dir, model_config_file, *extra)
    proc = start_group([sys.executable, *launcher(sleep=(pause, 300)), *args], ENV)
    metrics, deadline = os.path.join(run_dir, "metrics.jsonl"), time.monotonic() + 300
    while not (os.path.exists(metrics) and f'"step": {pause},' in open(metrics).read()):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1][-3000:]
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    assert ckpt.list_steps(run_dir) == [4]

    err = finished(start_group([sys.executable, "-m", "flows.cli", *args], ENV, stderr=subprocess.STDOUT))
    assert "resumed from" in err and "(step 4)" in err, err[-3000:]
    assert final_files(run_dir, steps) == final_files(reference, steps)  # bit-exact


def test_albert_evaluate_on_xla_matches_the_cpu(tmp_path, instances_dir, model_config_file):
    from model.evaluate import evaluate_checkpoint

    out = str(tmp_path / "run")
    Trainer(train_config(instances_dir, out, model_config_file, steps=4)).fit()  # on the CPU
    path = ckpt.latest(out)
    reports = {
        device: evaluate_checkpoint(path, instances_dir, batch_size=8, device=device, log=lambda m: None)
        for device in ("cpu", "tpu")
    }
    cpu, xla = reports["cpu"], reports["tpu"]
    print(f"\neval loss cpu {cpu['masked_lm']['loss']:.5f} xla (bf16) {xla['masked_lm']['loss']:.5f}")
    assert xla["masked_lm"]["n"] == cpu["masked_lm"]["n"] > 0  # every eval instance, the last short batch too
    assert xla["sentence_order"]["n"] == cpu["sentence_order"]["n"]
    assert xla["masked_lm"]["loss"] == pytest.approx(cpu["masked_lm"]["loss"], rel=0.02)  # bf16 on XLA
    assert xla["sentence_order"]["loss"] == pytest.approx(cpu["sentence_order"]["loss"], rel=0.05, abs=0.02)


def test_device_auto_is_the_xla_device_where_pjrt_device_is_set():
    from model.device import resolve_device

    assert os.environ["PJRT_DEVICE"] == "CPU" and resolve_device("auto").type == "xla"


def xla_run(args: list[str], processes: int = 1) -> str:
    """`albert pretrain ... --device tpu` in `processes` processes (torchrun when more than one)."""
    launch = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(processes)]
    cmd = [sys.executable, *(launch if processes > 1 else []), "-m", "flows.cli", *args]
    proc = subprocess.run(cmd, cwd=ROOT, env={**ENV, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return proc.stdout + proc.stderr


def test_two_xla_processes_train_as_one_job(tmp_path, instances_dir, model_config_file):
    """torchrun, 2 processes on XLA devices, global batch 8 (4 each): the weights of one XLA process
    trained on the same batches. Each XLA:CPU process has a runtime of its own, so the gradients are
    averaged through the host over gloo (model.distributed.xla_gradient_mean); fp32 so that the
    comparison is tight (the two differ only in the order of float sums)."""
    steps = 6
    common = ("--steps", str(steps), "--precision", "fp32", *TPU)
    one, two = str(tmp_path / "one"), str(tmp_path / "two")
    xla_run(cli_args(instances_dir, one, model_config_file, *common))
    log = xla_run(cli_args(instances_dir, two, model_config_file, *common), processes=2)
    assert "2 rank(s) x 1 micro-batch(es) of 4 = batch 8" in log and "xla:0 fp32" in log, log[-3000:]
    assert f"eval step {steps}" in log
    single, joint = (ckpt.load(ckpt.latest(out)) for out in (one, two))
    assert joint.trainer["world_size"] == 2 and [r["rank"] for r in joint.trainer["ranks"]] == [0, 1]
    a, b = single.model_tensors, joint.model_tensors
    assert a.keys() == b.keys()
    diff = max((a[k] - b[k]).abs().max().item() for k in a)
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=1e-5, atol=1e-5, msg=k)
    # Not vacuous: the steps moved the weights far beyond the tolerance (a rank that stepped on its own
    # half-batch gradient, not the average, would be off by about as much).
    torch.manual_seed(12345)
    from model.albert import AlbertForPreTraining
    from model.config import AlbertConfig

    vocab = a["albert.embeddings.word_embeddings.weight"].shape[0]
    init = AlbertForPreTraining(AlbertConfig.from_json_file(model_config_file).replace(vocab_size=vocab))
    # predictions.bias starts at the unigram log-frequencies, not at the seed's initialisation
    trained = [k for k in b if not (k.startswith("predictions.") and k.endswith("bias"))]
    moved = max((init.state_dict()[k] - b[k]).abs().max().item() for k in trained)
    print(f"\n2 XLA processes vs 1: max |weight difference| {diff:.2e}; moved from the init by {moved:.2e}")
    assert moved > 1e-3

"""The trainer: it learns, writes its outputs, accumulates gradients exactly, clips, skips non-finite
steps and stops on repeated ones without a poisoned checkpoint."""

from __future__ import annotations

import json
import os

import pytest
import torch

from core.errors import UserError
from flows.cli import main as albert
from model import checkpoint as ckpt
from model.train_loop import TrainingDiverged
from model.trainer import Trainer, train
from tests.model.train_fixtures import cli_args, train_config
from tests.trainer_hooks import inject_nan


def final_weights(run_dir: str) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(os.path.join(ckpt.latest(run_dir), "model.safetensors"))


def test_training_learns_and_writes_every_output(tmp_path, instances_dir, model_config_file):
    from core.tokenizer import Tokenizer
    from model.convert import load_pretrained

    out = str(tmp_path / "run")
    # zeros: the loss starts at ln V and must fall; the unigram default starts near the unigram's entropy
    config = train_config(
        instances_dir, out, model_config_file, steps=30, lr=2e-2, warmup_steps=3, output_bias_init="zeros"
    )
    summary = train(config)
    assert summary["step"] == 30 and summary["skipped_steps"] == 0
    rows = [json.loads(x) for x in open(os.path.join(out, "metrics.jsonl"))]
    train_rows = [r for r in rows if r["kind"] == "train"]
    assert len(train_rows) == 15 and all(r["tokens_per_s"] > 0 for r in train_rows)
    first = sum(r["loss"] for r in train_rows[:3]) / 3
    last = sum(r["loss"] for r in train_rows[-3:]) / 3
    assert last < first - 0.5, (first, last)  # ln(3000) + ln 2 ~ 8.7 at the start
    assert any(r["kind"] == "eval" for r in rows)
    assert os.path.getsize(os.path.join(out, "curves.png")) > 1000
    assert any(f.startswith("events.out.tfevents") for f in os.listdir(os.path.join(out, "tb")))
    path = summary["checkpoint"]
    assert path.endswith("checkpoints/step-30") and os.path.exists(os.path.join(path, "spm.model"))
    model = load_pretrained(path)  # the other engineer's folder format, as is
    spm_size = Tokenizer.load(os.path.join(path, "spm.model")).vocab_size
    assert model.config.vocab_size == spm_size != 21128  # the vocabulary's size, not the config's
    weights = final_weights(out)
    for k, v in model.state_dict().items():
        if k in weights:
            assert torch.equal(v, weights[k])


def test_gradient_accumulation_equals_one_big_batch(tmp_path, instances_dir, model_config_file):
    a = str(tmp_path / "big")
    b = str(tmp_path / "accumulated")
    train(train_config(instances_dir, a, model_config_file, steps=4))
    train(train_config(instances_dir, b, model_config_file, steps=4, micro_batch_size=2))  # 4 x 2
    wa, wb = final_weights(a), final_weights(b)
    assert wa.keys() == wb.keys()
    for k in wa:
        torch.testing.assert_close(wa[k], wb[k], rtol=1e-5, atol=1e-6, msg=k)
    c = str(tmp_path / "other-batch")
    train(train_config(instances_dir, c, model_config_file, steps=4, batch_size=4))
    assert any(not torch.allclose(wa[k], final_weights(c)[k]) for k in wa)  # the check can fail


def test_gradients_are_clipped_to_the_global_norm(tmp_path, instances_dir, model_config_file):
    trainer = Trainer(train_config(instances_dir, str(tmp_path / "r"), model_config_file, clip_norm=0.05))
    norms = []
    real_step = trainer.optimizer.step

    def spy():
        grads = [p.grad for p in trainer.model.parameters() if p.grad is not None]
        norms.append(
            float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads])))
        )
        return real_step()

    trainer.optimizer.step = spy
    batches = trainer._batches()
    m = trainer.train_step([next(batches)[0]])
    assert m["grad_norm"] > 0.05 and norms[0] == pytest.approx(0.05, rel=1e-4)


def test_non_finite_steps_are_skipped_and_counted(tmp_path, instances_dir, model_config_file, monkeypatch):
    out = str(tmp_path / "run")
    inject_nan(monkeypatch, (2, 3, 6))
    summary = train(train_config(instances_dir, out, model_config_file, steps=8))
    assert summary["step"] == 8 and summary["skipped_steps"] == 3
    assert all(torch.isfinite(v).all() for v in final_weights(out).values())
    rows = [json.loads(x) for x in open(os.path.join(out, "metrics.jsonl"))]
    assert [r["skipped_steps"] for r in rows if r["kind"] == "train"] == [0, 2, 2, 3]


def test_a_skipped_step_changes_neither_weights_nor_optimizer_state(
    tmp_path, instances_dir, model_config_file, monkeypatch
):
    inject_nan(monkeypatch, (2,))
    trainer = Trainer(train_config(instances_dir, str(tmp_path / "r"), model_config_file))
    batches = trainer._batches()

    def snapshot():
        opt = [t.clone() for s in trainer.optimizer.state.values() for t in s.values()]
        return [p.detach().clone() for p in trainer.model.parameters()], opt

    for _ in range(2):
        assert trainer.train_step([next(batches)[0]])["finite"]
        trainer.step += 1
    weights, opt = snapshot()
    m = trainer.train_step([next(batches)[0]])  # step 2: NaN loss
    assert not m["finite"]
    after_w, after_opt = snapshot()
    assert all(torch.equal(a, b) for a, b in zip(weights, after_w))
    assert all(torch.equal(a, b) for a, b in zip(opt, after_opt))
    assert all(p.grad is None for p in trainer.model.parameters())


def test_repeated_non_finite_steps_stop_the_run_without_a_poisoned_checkpoint(
    tmp_path, instances_dir, model_config_file, capsys, monkeypatch
):
    out = str(tmp_path / "run")
    inject_nan(monkeypatch, range(5, 20))
    cfg = train_config(instances_dir, out, model_config_file, steps=20, save_every=3)
    with pytest.raises(TrainingDiverged, match=r"non-finite for 5 steps in a row \(steps 6-10\).*step-3"):
        train(cfg)
    assert ckpt.list_steps(out) == [3]  # nothing written after the failures began
    # The command line reports it in one line (exit 2), no traceback.
    inject_nan(monkeypatch, range(20))
    code = albert(cli_args(instances_dir, str(tmp_path / "cli"), model_config_file, "--steps", "20",
                           "--max-bad-steps", "3"))  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "albert pretrain: error: loss/gradient non-finite for 3 steps in a row" in err
    assert "Traceback" not in err


def test_rerun_with_other_settings_is_refused(tmp_path, instances_dir, model_config_file):
    out = str(tmp_path / "run")
    train(train_config(instances_dir, out, model_config_file, steps=2))
    with pytest.raises(UserError, match=r"other settings \(lr: 0.01 -> 0.02\)"):
        Trainer(train_config(instances_dir, out, model_config_file, steps=2, lr=0.02))
    Trainer(train_config(instances_dir, out, model_config_file, steps=2, log_every=1))  # a (run) field: fine


def test_init_checkpoint_starts_from_given_weights(tmp_path, instances_dir, model_config_file):
    first = str(tmp_path / "first")
    train(train_config(instances_dir, first, model_config_file, steps=2))
    trainer = Trainer(train_config(instances_dir, str(tmp_path / "second"), model_config_file,
                                   init_checkpoint=ckpt.latest(first)))  # fmt: skip
    start = final_weights(first)
    for k, v in trainer.model.state_dict().items():
        if k in start:
            assert torch.equal(v, start[k]), k


def test_tpu_without_torch_xla_is_a_clear_error(tmp_path, instances_dir, model_config_file):
    pytest.importorskip("torch")
    try:
        import torch_xla  # noqa: F401

        pytest.skip("torch_xla is installed")
    except ImportError:
        pass
    with pytest.raises(UserError, match="--device tpu needs torch_xla"):
        Trainer(train_config(instances_dir, str(tmp_path / "r"), model_config_file, device="tpu"))


def test_device_auto_is_xla_where_pjrt_device_is_set(monkeypatch):
    """The TPU pool's jobs set PJRT_DEVICE=TPU: `auto` must not train on the host's CPU there."""
    from model.device import resolve_device

    if torch.cuda.is_available():
        pytest.skip("auto is CUDA first")
    monkeypatch.delenv("PJRT_DEVICE", raising=False)
    assert resolve_device("auto") == torch.device("cpu")
    monkeypatch.setenv("PJRT_DEVICE", "TPU")
    try:
        import torch_xla  # noqa: F401
    except ImportError:  # the main set: the same clear error as --device tpu
        with pytest.raises(UserError, match="--device tpu needs torch_xla"):
            resolve_device("auto")
    else:  # pragma: no cover - tests/tpu checks it on XLA's CPU device
        pytest.skip("torch_xla is installed")


@pytest.mark.parametrize("option", [{"compile": True}, {"parallel": "fsdp"}])
def test_tpu_refuses_what_it_does_not_run_yet(tmp_path, instances_dir, model_config_file, option):
    cfg = train_config(instances_dir, str(tmp_path / "r"), model_config_file, device="tpu", **option)
    with pytest.raises(UserError, match="--device tpu runs neither --compile nor --parallel fsdp"):
        cfg.check()


def test_fresh_runs_start_the_output_bias_at_the_label_unigram(tmp_path, instances_dir, model_config_file):
    import numpy as np

    from model.data import find_instances
    from model.evaluate import label_counts

    trainer = Trainer(train_config(instances_dir, str(tmp_path / "u"), model_config_file))
    V = trainer.config.vocab_size
    counts, _ = label_counts(find_instances(instances_dir, "train"), V)
    expected = np.log((counts + 1) / (counts.sum() + V))
    np.testing.assert_allclose(trainer.model.predictions.bias.detach().numpy(), expected, rtol=1e-5)
    # before any step the model leans to the most frequent label (the largest bias)
    assert int(trainer.model.predictions.bias.argmax()) == int(counts.argmax())
    zeros = Trainer(
        train_config(instances_dir, str(tmp_path / "z"), model_config_file, output_bias_init="zeros")
    )
    assert torch.count_nonzero(zeros.model.predictions.bias) == 0
    # the same first batch costs less MLM loss from the unigram start than from zeros
    batch = next(trainer._batches())[0]
    losses = []
    for t in (trainer, zeros):
        t.model.eval()
        with torch.no_grad():
            losses.append(float(t.model(**batch).mlm_loss))
    assert losses[0] < losses[1] - 1.0, losses


def test_a_run_folder_stands_for_its_newest_checkpoint(tmp_path, instances_dir, model_config_file):
    out = str(tmp_path / "run")
    summary = train(train_config(instances_dir, out, model_config_file, steps=2))
    assert ckpt.resolve(out) == summary["checkpoint"]  # the run folder -> its last checkpoint
    assert ckpt.resolve(summary["checkpoint"]) == summary["checkpoint"]  # a checkpoint stays itself
    os.makedirs(tmp_path / "empty" / "checkpoints")
    with pytest.raises(UserError, match="without a valid checkpoint"):
        ckpt.resolve(str(tmp_path / "empty"))
    report = str(tmp_path / "eval.json")
    assert albert(["evaluate", "--checkpoint", out, "--instances", instances_dir, "--out", report,
                   "--max-batches", "1"]) == 0  # fmt: skip
    assert json.load(open(report))["checkpoint"] == summary["checkpoint"]


def test_micro_batch_auto_follows_the_device_memory(tmp_path, instances_dir, model_config_file, monkeypatch):
    """CPU (memory unknown): auto = no accumulation, as before. A device whose memory holds 2.5 sequences
    beside the fixed part: 2 per forward pass, 4 accumulation steps for a batch of 8."""
    import model.memory as memory
    from model.trainer import Trainer

    cfg = train_config(instances_dir, str(tmp_path / "cpu"), model_config_file, micro_batch_size="auto")
    cpu = Trainer(cfg)
    assert (cpu.micro, cpu.accum) == (8, 1) and "unknown device memory" in cpu.memory_note

    one = memory.estimate_memory(cpu.config, 64, 10, 1, precision="fp32")
    fits = (2 * memory.GiB + one.fixed + 2.5 * one.per_sequence) / 0.85
    monkeypatch.setattr(memory, "device_memory", lambda device: int(fits))
    cfg = train_config(instances_dir, str(tmp_path / "small"), model_config_file, micro_batch_size="auto")
    small = Trainer(cfg)
    assert (small.micro, small.accum) == (2, 4)
    assert "micro-batch 2 of 8 per rank (4 accumulation steps)" in small.memory_note

"""Data parallelism on CPU (gloo): 2 processes launched by torchrun end with the parameters of a single
process trained on the same global batch, with DDP and with FSDP2 (fully_shard)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
import torch

from model import checkpoint as ckpt
from model.trainer import train
from tests.model.train_fixtures import cli_args, train_config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STEPS = 6


def torchrun(args: list[str]) -> str:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           "-m", "flows.cli", *args]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": ROOT, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return proc.stdout + proc.stderr


def weights(run_dir: str) -> dict[str, torch.Tensor]:
    return ckpt.load(ckpt.latest(run_dir)).model_tensors


@pytest.fixture(scope="module")
def single(tmp_path_factory, instances_dir, model_config_file) -> dict[str, torch.Tensor]:
    out = str(tmp_path_factory.mktemp("single") / "run")
    train(train_config(instances_dir, out, model_config_file, steps=STEPS))
    return weights(out)


def assert_same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=1e-5, atol=1e-6, msg=k)


# FSDP runs in the slow tier (and in test_multinode_fsdp); the fast suite keeps DDP.
@pytest.mark.parametrize("parallel", ["ddp", pytest.param("fsdp", marks=pytest.mark.slow)])
def test_two_ranks_equal_one_process_with_the_same_global_batch(
    tmp_path, instances_dir, model_config_file, single, parallel
):
    out = str(tmp_path / parallel)
    log = torchrun(
        cli_args(instances_dir, out, model_config_file, "--steps", str(STEPS), "--parallel", parallel)
    )
    assert "2 rank(s) x 1 micro-batch(es) of 4 = batch 8" in log
    distributed = weights(out)
    assert_same(single, distributed)
    state = ckpt.load(ckpt.latest(out)).trainer
    assert state["world_size"] == 2 and [r["rank"] for r in state["ranks"]] == [0, 1]
    # Not vacuous: the steps moved the weights well beyond the tolerance, away from the initialisation.
    from model.albert import AlbertForPreTraining
    from model.config import AlbertConfig

    vocab = single["albert.embeddings.word_embeddings.weight"].shape[0]
    torch.manual_seed(12345)  # the trainer's seed: the same initial weights
    init = AlbertForPreTraining(AlbertConfig.from_json_file(model_config_file).replace(vocab_size=vocab))
    init_state = init.state_dict()
    assert max((init_state[k] - distributed[k]).abs().max().item() for k in distributed) > 1e-3


@pytest.mark.slow
def test_two_ranks_resume_from_their_checkpoint(tmp_path, instances_dir, model_config_file, single):
    out = str(tmp_path / "ddp")
    args = cli_args(instances_dir, out, model_config_file, "--steps", str(STEPS), "--save-every", "3")
    torchrun(args)
    shutil.rmtree(os.path.join(out, f"checkpoints/step-{STEPS}"))
    log = torchrun(args)
    assert "resumed from" in log
    assert_same(single, weights(out))

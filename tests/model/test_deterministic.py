"""--deterministic: bit-exact reruns and resumes on CUDA (model/device.py: make_deterministic).

On an H100 in bf16, two runs of the same command ended in different weights, and so did a run resumed
from a checkpoint (cuDNN attention's backward, atomic-add reductions). With --deterministic they end
byte-identical. CPU kernels are deterministic already: there the flag must run and change nothing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
import torch

from model import checkpoint as ckpt
from tests.model.train_fixtures import cli_args

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYTHONPATH = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": PYTHONPATH}


def _pretrain(args: list[str]) -> str:
    """Run `albert pretrain` in its own process (the flag sets process-wide torch state)."""
    done = subprocess.run(
        [sys.executable, "-m", "flows.cli", *args],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def _final(run: str) -> tuple[bytes, bytes]:
    step = ckpt.latest(run)
    return tuple(
        open(os.path.join(step, f"{part}.safetensors"), "rb").read() for part in ("model", "optimizer")
    )


def test_make_deterministic_sets_the_kernels_of_its_process():
    code = (
        "import os, torch; from model.device import make_deterministic; make_deterministic(); b = torch.backends.cuda; "
        "print(torch.are_deterministic_algorithms_enabled(), b.cudnn_sdp_enabled(), b.mem_efficient_sdp_enabled(), "
        "b.flash_sdp_enabled(), os.environ['CUBLAS_WORKSPACE_CONFIG'])"
    )
    env = {k: v for k, v in ENV.items() if k != "CUBLAS_WORKSPACE_CONFIG"}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["True", "False", "False", "True", ":4096:8"]


def test_deterministic_runs_on_cpu_and_changes_nothing_there(tmp_path, instances_dir, model_config_file):
    extra = ("--steps", "4", "--set", "hidden_dropout_prob=0.1")  # dropout on: the RNG is exercised
    plain, det = str(tmp_path / "plain"), str(tmp_path / "det")
    _pretrain(cli_args(instances_dir, plain, model_config_file, *extra))
    out = _pretrain(cli_args(instances_dir, det, model_config_file, *extra, "--deterministic"))
    assert "fp32 deterministic" in out  # the run says so, and every op it ran had a deterministic kernel
    assert _final(det) == _final(plain)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_cuda_deterministic_reruns_and_resumes_are_bit_exact(tmp_path, instances_dir, model_config_file):
    extra = (
        "--device",
        "cuda",
        "--precision",
        "bf16",
        "--steps",
        "6",
        "--save-every",
        "3",
        "--keep-last",
        "5",
    )
    extra += ("--set", "hidden_dropout_prob=0.1", "--deterministic")
    first, second = str(tmp_path / "first"), str(tmp_path / "second")
    _pretrain(cli_args(instances_dir, first, model_config_file, *extra))
    _pretrain(cli_args(instances_dir, second, model_config_file, *extra))
    assert _final(second) == _final(first)
    resumed = str(tmp_path / "resumed")  # the first run, as if stopped after its step-3 checkpoint
    shutil.copytree(first, resumed)
    shutil.rmtree(os.path.join(resumed, "checkpoints", "step-6"))
    out = _pretrain(cli_args(instances_dir, resumed, model_config_file, *extra))
    assert "resumed from" in out and "step-3" in out
    assert _final(resumed) == _final(first)

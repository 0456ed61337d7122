"""Fixtures of the training tests: a small real instance set and a tiny model config (session scope).

The instances come from the bundled sample through pipelines.instance_builder (no Beam: seconds),
written exactly as the instance stage writes them: {train,eval}-*.tfrecord + manifest.json."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.model.tiny import TINY_MODEL, L

P = 10
DOCS = 120


def write_instances(
    out: str, docs: list[dict], vocab_dir: str, dupe: int = 2, files: int = 3, seed: int = 12345
) -> str:
    """Instances of `docs` into `out` (train split in `files` files, eval split in one), + manifest
    (with the vocabulary's sha256 and the outputs' hashes, as pipelines/instances/stage.py writes them)."""
    from core import storage
    from core.manifest import write_manifest
    from core.tokenizer import Tokenizer
    from pipelines.instance_builder import InstanceConfig, build_group, prepare_document, split_of
    from pipelines.masking import MaskingConfig
    from pipelines.packing import PackingConfig

    os.makedirs(out, exist_ok=True)
    tok = Tokenizer.load(vocab_dir)
    spm = os.path.join(vocab_dir, "spm.model")
    config = InstanceConfig(
        packing=PackingConfig(L), masking=MaskingConfig(max_predictions=P), eval_fraction=0.1, seed=seed
    )
    from collections import Counter

    notes = Counter()
    prepared = [
        prepare_document({k: v for k, v in d.items() if k != "words"}, "zh", notes, tok.normalizer)
        for d in docs
    ]
    prepared = [p for p in prepared if not isinstance(p, str)]
    counts = {}
    for split in ("train", "eval"):
        part = [p for p in prepared if split_of(p.id, config.eval_fraction) == split]
        groups = [part[k::files] for k in range(files)] if split == "train" else [part]
        n = 0
        for g, docs_g in enumerate(groups):
            blobs = []
            for d in range(dupe):
                blob, stats = build_group(docs_g, tok, config, d)
                blobs.append(blob)
                n += stats["instances"]
            with open(os.path.join(out, f"{split}-{g:05d}.tfrecord"), "wb") as f:
                f.write(b"".join(blobs))
        counts[split] = {"instances": n}
    write_manifest(
        out,
        "instances",
        config={"packing": {"max_seq_length": L}, "masking": {"max_predictions": P}, "dupe_factor": dupe},
        vocab={"path": spm, "sha256": storage.sha256(spm)},
        seed=seed,
        summary=counts,
        outputs={
            n: storage.sha256(os.path.join(out, n))
            for n in sorted(os.listdir(out))
            if n.endswith(".tfrecord")
        },
    )
    return out


@pytest.fixture(scope="session")
def instances_dir(tmp_path_factory, sample_docs, vocab_dir) -> str:
    return write_instances(str(tmp_path_factory.mktemp("instances")), sample_docs[:DOCS], vocab_dir)


@pytest.fixture(scope="session")
def model_config_file(tmp_path_factory, vocab_dir) -> str:
    """A tiny AlbertConfig JSON (the vocabulary size is set by the trainer from spm.model)."""
    from model.config import AlbertConfig

    path = tmp_path_factory.mktemp("config") / "tiny.json"
    path.write_text(json.dumps(AlbertConfig(**TINY_MODEL).to_hf_dict()))
    return str(path)


def train_config(instances: str, out: str, config_file: str, **overrides):
    from model.train_config import TrainConfig

    values = dict(
        instances=instances,
        out=out,
        model=config_file,
        steps=6,
        batch_size=8,
        lr=1e-2,
        warmup_steps=2,
        shuffle_window=64,
        num_workers=0,
        save_every=1000,
        log_every=2,
        eval_batches=2,
        device="cpu",
    )
    values.update(overrides)
    return TrainConfig.from_flat(**values)


def cli_args(instances: str, out: str, config_file: str, *extra: str) -> list[str]:
    """`albert pretrain` arguments matching train_config's defaults."""
    return [
        "pretrain",
        "--instances", instances,
        "--out", out,
        "--config", config_file,
        "--batch-size", "8",
        "--lr", "1e-2",
        "--warmup-steps", "2",
        "--shuffle-window", "64",
        "--num-workers", "0",
        "--log-every", "2",
        "--eval-batches", "2",
        "--device", "cpu",
        *extra,
    ]  # fmt: skip


def perturbed_copy(src: str, dst: str) -> str:
    """A much worse model: checkpoint `src`'s weights with large noise, written to `dst` (config.json and
    spm.model copied, no checksums.json: a hand-made folder)."""
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    os.makedirs(dst)
    for name in ("config.json", "spm.model"):
        shutil.copy(os.path.join(src, name), dst)
    g = torch.Generator().manual_seed(0)
    state = {
        k: v + 3.0 * torch.randn(v.shape, generator=g) if v.is_floating_point() else v
        for k, v in load_file(os.path.join(src, "model.safetensors")).items()
    }
    save_file(state, os.path.join(dst, "model.safetensors"), metadata={"format": "pt"})
    return dst


# ------------------------------------------------------------------------ runs stopped by a signal

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def stoppable(steps: int) -> tuple[str, ...]:
    """Trainer options of a run to stop: dropout on, a loader worker process, no checkpoint before the
    stop (a resume must restore the RNG and the data position, and any checkpoint there is the one the
    stop wrote)."""
    return (
        "--steps",
        str(steps),
        "--save-every",
        "1000",
        "--num-workers",
        "1",
        "--set",
        "hidden_dropout_prob=0.1",
    )


def start_group(cmd: list[str], env: dict, stderr=subprocess.PIPE) -> subprocess.Popen:
    """`cmd` from the repository root in its own process group (as Prefect and torchrun start one),
    its output piped (stderr=subprocess.STDOUT: merged)."""
    return subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True, start_new_session=True
    )


def finished(proc: subprocess.Popen) -> str:
    """The merged output of a process that must end with exit 0."""
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-5000:]
    return out

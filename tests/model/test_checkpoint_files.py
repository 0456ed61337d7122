"""Checkpoints are written and read as files, never as one bytes object in memory: the files are the
same bytes as safetensors' in-memory serialisation, and saving or loading a checkpoint with one big
tensor keeps the Python heap far below the tensor's size (before, each save and load held a whole
file as bytes)."""

from __future__ import annotations

import hashlib
import json
import os
import tracemalloc

import fsspec
import pytest
import torch
from safetensors.torch import save as st_save

from model import checkpoint as ckpt
from model.albert import AlbertForPreTraining
from model.config import AlbertConfig
from model.convert import read_checkpoint, save_pretrained

BIG = 64 << 20  # bytes of the big tensor
LIMIT = BIG / 4  # files are hashed in 4 MB blocks (storage.sha256): about 8 MB of heap whatever the size


def _save(run_dir, model_tensors, step=1, config_json=None):
    return ckpt.save(
        run_dir,
        step,
        config_json=config_json or {"model_type": "albert"},
        model_tensors=model_tensors,
        optimizer_tensors={"w::exp_avg": torch.arange(6.0).view(2, 3)},
        optimizer_json={"class": "Lamb"},
        trainer_json={"step": step},
        rng_tensors={"torch_cpu@0": torch.get_rng_state()},
    )


def _read(fs_or_none, path):
    if fs_or_none is None:
        return open(path, "rb").read()
    return fs_or_none.cat_file(path)


def _expected_files(model_tensors, step):
    files = {
        "config.json": (json.dumps({"model_type": "albert"}, indent=2, sort_keys=True) + "\n").encode(),
        "model.safetensors": st_save(model_tensors, metadata={"format": "pt"}),
        "optimizer.safetensors": st_save({"w::exp_avg": torch.arange(6.0).view(2, 3)}),
        "optimizer.json": (json.dumps({"class": "Lamb"}, indent=1) + "\n").encode(),
        "rng.safetensors": st_save({"torch_cpu@0": torch.get_rng_state()}),
        "trainer.json": (json.dumps({"step": step}, indent=1) + "\n").encode(),
    }
    sums = {n: hashlib.sha256(d).hexdigest() for n, d in files.items()}
    files["checksums.json"] = (json.dumps({"step": step, "files": sums}, indent=1) + "\n").encode()
    return files


def test_checkpoint_files_are_the_bytes_of_the_in_memory_serialisation(tmp_path):
    tensors = {"a": torch.randn(5, 7), "b": torch.arange(10, dtype=torch.int64)}
    expected = _expected_files(tensors, 3)
    local = _save(str(tmp_path / "run"), tensors, step=3)
    assert sorted(os.listdir(local)) == sorted(expected)
    for name, data in expected.items():
        assert _read(None, os.path.join(local, name)) == data, name
    # every file gets the umask's mode, as a file written whole does (save_file alone would give 0600)
    assert len({os.stat(os.path.join(local, name)).st_mode for name in expected}) == 1
    remote = _save(f"memory://ckpt-files-{os.getpid()}/run", tensors, step=3)
    fs = fsspec.filesystem("memory")
    root = remote.removeprefix("memory://")
    assert sorted(n.rsplit("/", 1)[-1] for n in fs.ls(root, detail=False)) == sorted(expected)
    for name, data in expected.items():
        assert _read(fs, f"{root}/{name}") == data, name
    for path in (local, remote):
        loaded = ckpt.load(path)
        assert all(torch.equal(loaded.model_tensors[k], v) for k, v in tensors.items())


def test_save_pretrained_writes_the_same_bytes(tmp_path):
    model = AlbertForPreTraining(AlbertConfig(vocab_size=64, embedding_size=8, hidden_size=16,
                                              num_hidden_layers=1, num_attention_heads=2,
                                              intermediate_size=32, max_position_embeddings=32))  # fmt: skip
    from model.convert import canonical_state_dict

    out = save_pretrained(model, tmp_path / "m")
    data = open(os.path.join(out, "model.safetensors"), "rb").read()
    assert data == st_save(canonical_state_dict(model), metadata={"format": "pt"})
    sums = json.load(open(os.path.join(out, "checksums.json")))["files"]
    assert sums["model.safetensors"] == hashlib.sha256(data).hexdigest()


def _peak(fn):
    tracemalloc.start()
    try:
        result = fn()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_saving_and_loading_a_big_tensor_keeps_the_python_heap_small(tmp_path):
    big = {"big": torch.ones(BIG // 4)}  # 64 MB of float32
    config = AlbertConfig(vocab_size=64).to_hf_dict()  # what read_checkpoint requires of config.json
    path, save_peak = _peak(lambda: _save(str(tmp_path / "run"), big, config_json=config))
    assert save_peak < LIMIT, f"saving: Python heap peak {save_peak / 1e6:.1f} MB for a 64 MB tensor"
    loaded, load_peak = _peak(lambda: ckpt.load(path))
    assert load_peak < LIMIT, f"loading: Python heap peak {load_peak / 1e6:.1f} MB for a 64 MB tensor"
    assert torch.equal(loaded.model_tensors["big"], big["big"])
    (_, state, _), read_peak = _peak(lambda: read_checkpoint(path))
    assert read_peak < LIMIT, f"read_checkpoint: Python heap peak {read_peak / 1e6:.1f} MB"
    assert torch.equal(state["big"], big["big"])


def test_a_file_replaced_between_its_hash_and_its_load_is_refused(tmp_path, monkeypatch):
    """Hashing and loading read the file twice; a file swapped in between is not what was verified."""
    from model import checksums

    path = _save(str(tmp_path / "run"), {"w": torch.ones(3)})
    weights = os.path.join(path, "model.safetensors")
    real_sha256 = checksums.storage.sha256

    def sha256_then_replace(p):
        digest = real_sha256(p)
        if p == weights:
            other = weights + ".other"
            with open(other, "wb") as f:
                f.write(st_save({"w": torch.zeros(3)}, metadata={"format": "pt"}))
            os.replace(other, weights)
        return digest

    monkeypatch.setattr(checksums.storage, "sha256", sha256_then_replace)
    with pytest.raises(ckpt.CheckpointError, match="changed while it was read"):
        ckpt.load(path)

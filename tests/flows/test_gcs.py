"""The whole chain with its storage root on gs://, served by a local GCS emulator: every stage reads and
writes the bucket, a rerun reuses every stage, and nothing lands on the local disk."""

from __future__ import annotations

import os

import pytest

from core import storage
from tests.flows.conftest import TINY


def _local_files(folder) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, n), folder) for d, _, ns in os.walk(folder) for n in ns)


# Slow: the rehearsal (CI) runs the whole chain on the GCS emulator too; fast GCS tests: test_trust_cli.
@pytest.mark.slow
def test_chain_on_gcs_reuses_every_stage_and_writes_nothing_locally(
    bucket, sample_text, tmp_path, monkeypatch
):
    from flows.repretrain import repretrain

    raw = f"{bucket}/raw/sample.txt"
    storage.copy(sample_text, raw)  # the input is in the bucket too
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)  # a relative path anywhere would land here
    root = f"{bucket}/factory"
    first = repretrain(sources=[f"text:{raw}"], storage_root=root, **TINY)

    for stage in ("corpus", "vocab", "instances", "pretrain"):
        assert first[stage]["dir"].startswith(f"{root}/"), (stage, first[stage]["dir"])
        assert storage.exists(storage.join(first[stage]["dir"], "manifest.json")), stage
        assert not first[stage]["reused"], stage
    run = first["pretrain"]["dir"]
    ckpt = first["pretrain"]["checkpoint"]
    assert ckpt.startswith(f"{run}/checkpoints/step-")
    assert {"config.json", "model.safetensors", "spm.model", "checksums.json"} <= set(storage.listdir(ckpt))
    assert storage.read_text(f"{run}/metrics.jsonl").count('"kind": "train"') >= 1
    assert storage.isfile(f"{run}/curves.png") and storage.isfile(f"{run}/train_config.json")
    assert any(n.startswith("events.out.tfevents") for n in storage.listdir(f"{run}/tb"))
    assert storage.glob(f"{root}/evals/*/eval.json") and storage.glob(
        f"{root}/evals/*/eval.per-sequence.json"
    )
    assert storage.glob(f"{first['instances']['dir']}/train-*.tfrecord")
    log = storage.read_text(f"{root}/registry/albert/promotions.jsonl")
    assert '"event": "reject"' in log  # four steps do not beat the baselines: decided and logged
    assert first["promotion"]["decision"]["checks"][0]["reference_kind"] == "baseline:unigram"

    again = repretrain(sources=[f"text:{raw}"], storage_root=root, **TINY)
    for stage in ("corpus", "vocab", "instances", "pretrain"):
        assert again[stage]["reused"] and again[stage]["dir"] == first[stage]["dir"], stage
    assert _local_files(cwd) == []

"""promotion.registry: versions and the pointer, rollback, concurrent promotions
(threads and processes), and the GCS compare-and-swap as sent to a fake client."""

from __future__ import annotations

import json
import multiprocessing
import os
import threading
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import pytest

from core.errors import UserError
from promotion.gate import Decision
from promotion.promote import gate_and_promote
from promotion.registry import Registry
from promotion.stores import GCSStore, LocalStore, PromotionConflict

# The gate's decision is promotion/gate.py's business (tests/promotion/test_gate.py); here the registry acts on it.
PROMOTE = Decision(True, ["the test says promote"])
REJECT = Decision(False, ["the test says reject"])


# ------------------------------------------------------------------------------------- registry


def make_checkpoint(root, name: str, weights: bytes = b"w") -> str:
    d = root / name
    d.mkdir(parents=True)
    (d / "model.safetensors").write_bytes(weights)
    (d / "config.json").write_text(json.dumps({"hidden_size": 8}))
    (d / "spm.model").write_bytes(b"spm")
    return str(d)


def test_register_promote_and_rollback(tmp_path):
    reg = Registry(str(tmp_path / "registry"), "tiny")
    assert reg.production() is None and reg.versions() == []
    c1 = make_checkpoint(tmp_path, "c1", b"one")
    r1 = gate_and_promote(reg, c1, {"mlm_loss": 6.0, "sop_accuracy": 0.5}, None, reg.read_pointer(), PROMOTE)
    assert (r1.event, r1.version, r1.production) == ("promote", "v1", "v1")
    v1 = tmp_path / "registry" / "tiny" / "v1"
    assert sorted(os.listdir(v1)) == [
        ".claim",
        "config.json",
        "lineage.json",
        "metrics.json",
        "model.safetensors",
        "spm.model",
    ]
    assert (v1 / "model.safetensors").read_bytes() == b"one"
    assert json.loads((v1 / "lineage.json").read_text())["parent_version"] is None

    # a candidate that is not better is logged and changes nothing
    c2 = make_checkpoint(tmp_path, "c2", b"two")
    r2 = gate_and_promote(
        reg,
        c2,
        {"mlm_loss": 5.99, "sop_accuracy": 0.5},
        {"mlm_loss": 6.0, "sop_accuracy": 0.5},
        reg.read_pointer(),
        REJECT,
    )
    assert (r2.event, r2.version, r2.production) == ("reject", None, "v1")
    assert reg.versions() == ["v1"]

    c3 = make_checkpoint(tmp_path, "c3", b"three")
    r3 = gate_and_promote(
        reg,
        c3,
        {"mlm_loss": 5.0, "sop_accuracy": 0.5},
        {"mlm_loss": 6.0, "sop_accuracy": 0.5},
        reg.read_pointer(),
        PROMOTE,
    )
    assert (r3.event, r3.version) == ("promote", "v2")
    pointer = reg.production()
    assert pointer["version"] == "v2" and pointer["previous"] == ["v1"]
    assert json.loads((tmp_path / "registry/tiny/v2/lineage.json").read_text())["parent_version"] == "v1"

    back = reg.rollback(reason="bad downstream numbers")
    assert back["version"] == "v1" and back["previous"] == [] and back["rolled_back_from"] == "v2"
    with pytest.raises(UserError, match="nothing to roll back"):
        reg.rollback()
    events = [e["event"] for e in reg.log()]
    assert events == ["promote", "reject", "promote", "rollback"]
    assert reg.versions() == ["v1", "v2"]  # versions are immutable: a rollback deletes nothing


def test_rollback_without_production_fails(tmp_path):
    with pytest.raises(UserError, match="no production"):
        Registry(str(tmp_path)).rollback()


def test_set_production_with_a_stale_token_conflicts(tmp_path):
    reg = Registry(str(tmp_path))
    stale = reg.read_pointer()
    for name in ("a", "b"):
        v = reg.register(make_checkpoint(tmp_path, name), {"mlm_loss": 1.0}, {})
        if name == "a":
            reg.set_production(v, stale[1])
    with pytest.raises(PromotionConflict):
        reg.set_production("v2", stale[1])  # production moved to v1 after `stale` was read
    assert reg.production()["version"] == "v1"


def test_incomplete_version_is_not_listed_and_its_number_is_not_reused(tmp_path):
    reg = Registry(str(tmp_path))
    (tmp_path / "albert" / "v1").mkdir(parents=True)
    (tmp_path / "albert" / "v1" / ".claim").write_text("{}")  # a registration that crashed midway
    assert reg.versions() == []
    assert reg.register(make_checkpoint(tmp_path, "c"), {}, {}) == "v2"
    with pytest.raises(UserError):
        reg.set_production("v1", None)


def test_register_refuses_an_incomplete_checkpoint(tmp_path):
    d = tmp_path / "c"
    d.mkdir()
    (d / "config.json").write_text("{}")
    with pytest.raises(UserError, match="model.safetensors"):
        Registry(str(tmp_path / "r")).register(str(d), {}, {})


# --------------------------------------------------------------------------- concurrent promotion

N_RACERS = 6


def _race(args) -> dict:
    root, i, barrier = args
    reg = Registry(root)
    snapshot = reg.read_pointer()  # every racer gates against the same production (v1)
    prod = reg.read_json(snapshot[0]["version"], "metrics.json")
    if barrier is not None:
        barrier.wait()
    result = gate_and_promote(
        reg,
        os.path.join(root, "..", f"cand{i}"),
        {"mlm_loss": 4.0 - i * 0.01, "sop_accuracy": 0.6},
        prod,
        snapshot,
        PROMOTE,
    )
    return result.to_dict()


def _prepare_race(tmp_path) -> str:
    root = str(tmp_path / "registry")
    reg = Registry(root)
    first = make_checkpoint(tmp_path, "first")
    assert (
        gate_and_promote(
            reg, first, {"mlm_loss": 5.0, "sop_accuracy": 0.6}, None, reg.read_pointer(), PROMOTE
        ).event
        == "promote"
    )
    for i in range(N_RACERS):
        make_checkpoint(tmp_path, f"cand{i}", f"weights{i}".encode())
    return root


def _check_race(root: str, results: list[dict]) -> None:
    events = sorted(r["event"] for r in results)
    assert events == ["conflict"] * (N_RACERS - 1) + ["promote"]
    winner = next(r for r in results if r["event"] == "promote")
    reg = Registry(root)
    pointer = reg.production()  # parses: the pointer was never half-written
    assert pointer["version"] == winner["version"] and pointer["previous"] == ["v1"]
    # every racer got its own complete version; only the winner is production
    assert len(reg.versions()) == N_RACERS + 1
    log = reg.log()  # every line is whole JSON
    assert [e["event"] for e in log].count("promote") == 2 and [e["event"] for e in log].count(
        "conflict"
    ) == N_RACERS - 1
    for r in results:
        if r["event"] == "conflict":
            assert r["production"] == winner["version"]
            assert "changed while this promotion ran" in r["decision"]["reasons"][-1]


def test_concurrent_promotions_in_threads(tmp_path):
    root = _prepare_race(tmp_path)
    barrier = threading.Barrier(N_RACERS)
    with ThreadPoolExecutor(N_RACERS) as pool:
        results = list(pool.map(_race, [(root, i, barrier) for i in range(N_RACERS)]))
    _check_race(root, results)


def test_concurrent_promotions_in_processes(tmp_path):
    root = _prepare_race(tmp_path)
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(N_RACERS)
        with ProcessPoolExecutor(N_RACERS, mp_context=ctx) as pool:
            results = list(pool.map(_race, [(root, i, barrier) for i in range(N_RACERS)]))
    _check_race(root, results)


def test_local_store_cas_under_contention(tmp_path):
    """Many increments of one counter through write_if retries: no update is lost."""
    store = LocalStore(str(tmp_path))

    def bump(_):
        while True:
            data, token = store.read("counter.json")
            n = json.loads(data)["n"] if data else 0
            if store.write_if("counter.json", json.dumps({"n": n + 1}).encode(), token):
                return

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(bump, range(80)))
    assert json.loads(store.read("counter.json")[0])["n"] == 80


# ------------------------------------------------------------------------------------ GCS (fake)


def test_gcs_pointer_update_sends_the_generation_it_read(fake_gcs, tmp_path):
    store = GCSStore("gs://models/registry", client=fake_gcs)
    reg = Registry("gs://models/registry", "tiny", store=store)
    v1 = reg.register(make_checkpoint(tmp_path, "a"), {"mlm_loss": 5.0}, {})
    _, token = reg.read_pointer()
    assert token is None
    reg.set_production(v1, token)
    bucket = fake_gcs.buckets["models"]
    # creating the pointer: "must not exist" is generation 0
    assert ("upload", "registry/tiny/production.json", 0) in bucket.calls
    # the claim of a version is an exclusive create too
    assert ("upload", "registry/tiny/v1/.claim", 0) in bucket.calls
    pointer, gen = reg.read_pointer()
    assert pointer["version"] == "v1" and gen == bucket.objects["registry/tiny/production.json"][1]

    v2 = reg.register(make_checkpoint(tmp_path, "b"), {"mlm_loss": 4.0}, {})
    bucket.calls.clear()
    reg.set_production(v2, gen)
    assert bucket.calls[-1] == ("upload", "registry/tiny/production.json", gen)
    assert reg.production()["path"] == "gs://models/registry/tiny/v2"

    # a writer that read before someone else's update sends the old generation and loses
    with pytest.raises(PromotionConflict):
        reg.set_production(v1, gen)
    assert reg.production()["version"] == "v2"
    assert reg.versions() == ["v1", "v2"]
    assert reg.rollback()["version"] == "v1"


def test_gcs_concurrent_promotions_one_winner(fake_gcs, tmp_path):
    store = GCSStore("gs://models", client=fake_gcs)
    reg = Registry("gs://models", store=store)
    first = make_checkpoint(tmp_path, "first")
    gate_and_promote(reg, first, {"mlm_loss": 5.0, "sop_accuracy": 0.6}, None, reg.read_pointer(), PROMOTE)
    snapshot = reg.read_pointer()
    cands = [make_checkpoint(tmp_path, f"c{i}") for i in range(N_RACERS)]
    barrier = threading.Barrier(N_RACERS)

    def race(i):
        barrier.wait()
        return gate_and_promote(
            reg,
            cands[i],
            {"mlm_loss": 4.0, "sop_accuracy": 0.6},
            {"mlm_loss": 5.0, "sop_accuracy": 0.6},
            snapshot,
            PROMOTE,
        ).event

    with ThreadPoolExecutor(N_RACERS) as pool:
        events = sorted(pool.map(race, range(N_RACERS)))
    assert events == ["conflict"] * (N_RACERS - 1) + ["promote"]
    assert len(reg.versions()) == N_RACERS + 1  # no two racers shared a version number
    assert len(reg.log()) == N_RACERS + 1  # the log append survived contention (CAS retries)


def test_memory_filesystem_registry_roundtrip(tmp_path):
    reg = Registry("memory://registry-test", "m")
    v = reg.register(make_checkpoint(tmp_path, "a"), {"mlm_loss": 1.0}, {})
    reg.set_production(v, reg.read_pointer()[1])
    assert reg.production()["version"] == "v1"
    assert reg.versions() == ["v1"]

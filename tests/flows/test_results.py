"""Persisted (cached) task results and flow results are JSON documents, never pickle."""

from __future__ import annotations

import json
import os


def test_cached_results_are_stored_as_json(tmp_path):
    from prefect.cache_policies import INPUTS, TASK_SOURCE
    from prefect.settings import PREFECT_LOCAL_STORAGE_PATH, temporary_settings

    from flows.prefect_run import stage_flow, stage_task

    calls = []

    @stage_task("json-probe", cache_policy=INPUTS + TASK_SOURCE, persist_result=True)
    def probe(x: int) -> dict:
        calls.append(x)
        return {"x": x, "values": [1.5, "a", None]}

    @stage_flow("json-probe-flow")
    def run(x: int) -> dict:
        return probe(x)

    store = tmp_path / "results"
    with temporary_settings({PREFECT_LOCAL_STORAGE_PATH: str(store)}):
        assert run(7) == {"x": 7, "values": [1.5, "a", None]}
        assert run(7) == {"x": 7, "values": [1.5, "a", None]}  # the cached record, read back
    assert calls == [7]
    # Every stored file is JSON (a pickle would not parse); result records name the JSON serializer.
    documents = [json.loads((store / name).read_bytes()) for name in os.listdir(store)]
    records = [d for d in documents if isinstance(d, dict) and "metadata" in d]
    assert records, documents
    for record in records:
        assert record["metadata"]["serializer"]["type"] == "json", record["metadata"]
        assert json.loads(record["result"]) == {"x": 7, "values": [1.5, "a", None]}


def test_every_flow_and_stage_task_declares_json_results():
    from prefect import Flow
    from prefect.tasks import Task

    import flows.build_corpus
    import flows.build_instances
    import flows.evaluate
    import flows.finetune
    import flows.pretrain
    import flows.promote
    import flows.repretrain
    import flows.train_vocab

    found = []
    for module in (
        flows.build_corpus, flows.build_instances, flows.evaluate, flows.finetune, flows.pretrain,
        flows.promote, flows.repretrain, flows.train_vocab,
    ):  # fmt: skip
        for obj in vars(module).values():
            if isinstance(obj, Flow | Task) and obj.__module__ == module.__name__:
                found.append(obj)
                assert getattr(obj.result_serializer, "type", obj.result_serializer) == "json", obj.name
    assert len(found) >= 15

"""The run form of the Prefect UI, as the parameter schemas of the deployed flows draw it
(flows/params.py says which schema shapes the UI renders how): every parameter described, a default
shown for every optional one, every fixed set of values a dropdown (an `enum`, never a `const`), and
what the dropdowns offer accepted by the server and by the flow itself."""

from __future__ import annotations

import asyncio
import inspect
import os
import typing

import pytest
import yaml

from flows.deploy import DEFAULT_FILE, REPO_ROOT, load_specs
from flows.deployments import apply, ensure_pools

DEPLOYED_FLOWS = {
    "build-corpus",
    "train-vocab",
    "build-instances",
    "pretrain",
    "evaluate",
    "promote",
    "rollback",
    "repretrain",
}


def _deployed() -> dict:
    """flow name -> flow, for every flow that infra/prefect.yaml deploys."""
    return {spec.flow.name: spec.flow for spec in load_specs()[0]}


def _schemas(schema: dict) -> typing.Iterator[dict]:
    """A property's schema and every schema nested in it (anyOf branches, array items)."""
    yield schema
    for branch in schema.get("anyOf", []):
        yield from _schemas(branch)
    if isinstance(schema.get("items"), dict):
        yield from _schemas(schema["items"])


def _offered(schema: dict) -> list:
    """The values a property's dropdowns offer (every enum in it)."""
    return [value for s in _schemas(schema) for value in s.get("enum", [])]


def test_every_parameter_of_every_deployed_flow_is_described_and_shows_its_default():
    flows = _deployed()
    assert DEPLOYED_FLOWS <= set(flows), sorted(flows)
    for name, flow in flows.items():
        schema = flow.parameters.model_dump_for_openapi()
        signature = inspect.signature(flow.fn).parameters
        assert list(schema["properties"]) == list(signature), name
        for param, prop in schema["properties"].items():
            assert len(prop.get("description", "")) > 10, f"{name}.{param} has no description"
            assert "\n\n" not in prop["description"], f"{name}.{param}: the docstring entry ran on"
            if signature[param].default is not inspect.Parameter.empty:
                assert "default" in prop, f"{name}.{param} shows no default"
                assert prop["default"] == signature[param].default or prop["default"] == list(
                    signature[param].default
                )
            else:
                assert param in schema.get("required", []), f"{name}.{param}"


def test_every_fixed_set_is_a_dropdown_never_a_const():
    from flows import params
    from model.finetune import TASKS

    for name, flow in _deployed().items():
        for param, prop in flow.parameters.model_dump_for_openapi()["properties"].items():
            for s in _schemas(prop):
                # the v1 form shows a const as "cannot be changed" over an empty box
                assert "const" not in s, f"{name}.{param}: {s}"
                if "enum" in s:  # a dropdown needs the enum's type (v1: string; v2: a primitive)
                    assert s["type"] == "string", f"{name}.{param}: {s}"
            for branch in prop.get("anyOf", []):  # each toggle of a union says what it is
                assert branch.get("title"), f"{name}.{param}: an untitled branch {branch}"

    repretrain = _deployed()["repretrain"].parameters.properties
    assert _offered(repretrain["config"]) == list(params.PRESETS)
    assert repretrain["config"]["anyOf"][0]["enum"] == list(params.PRESETS)  # first: v1 opens it
    assert repretrain["config"]["default"] == "tiny"
    assert _offered(repretrain["micro_batch_size"]) == ["auto"]
    assert [b["type"] for b in repretrain["micro_batch_size"]["anyOf"]] == ["string", "integer", "null"]
    assert repretrain["finetune_tasks"]["items"]["enum"] == list(TASKS)
    assert repretrain["whole_word"]["enum"] == ["zh", "sp", "gold", "none"]
    assert repretrain["corpus_runner"]["enum"][0] == "DirectRunner"
    assert repretrain["optimizer"]["enum"] == ["lamb", "adamw"]
    assert repretrain["precision"]["enum"] == ["auto", "bf16", "fp32"]
    assert repretrain["pretrain_backend"]["enum"] == ["local", "deployment"]
    pretrain = _deployed()["pretrain"].parameters.properties
    assert _offered(pretrain["device"]) == ["auto", "cpu", "cuda", "tpu"]
    assert _offered(pretrain["micro_batch_size"]) == ["auto"]


def test_the_deployment_dropdown_lists_the_accelerator_deployments_of_the_file():
    from flows.params import PretrainDeploymentName

    doc = yaml.safe_load(open(DEFAULT_FILE, encoding="utf-8"))
    accelerators = {
        f"pretrain/{d['name']}"
        for d in doc["deployments"]
        if d["entrypoint"].endswith(":pretrain") and d["work_pool"]["name"] != "albert-process"
    }
    assert set(typing.get_args(PretrainDeploymentName)) == accelerators
    for flow, param in (("pretrain", "deployment"), ("repretrain", "pretrain_deployment")):
        assert set(_offered(_deployed()[flow].parameters.properties[param])) == accelerators


@pytest.mark.parametrize(
    "name, accepted, refused",
    [
        (
            "ModelConfig",
            ["tiny", "bert_large", "my/config.json", "gs://bucket/albert_config.json"],
            ["huge", "", "config.yaml", "json", None, 3],
        ),
        ("Device", ["auto", "cpu", "cuda", "tpu", "cuda:0", "cuda:12"], ["gpu", "cuda:", "cuda:x", "", None]),
        ("MicroBatch", ["auto", None, 1, 32, 4096], ["max", "", 0, -8, 2.5, [32]]),
        (
            "PretrainDeployment",
            ["pretrain/gpu-vertex", "pretrain/tpu-kubernetes", "pretrain/gpu-rehearsal"],
            ["gpu-vertex", "pretrain/", "a/b/c", None],
        ),
        ("Downstream", [None, {"task": "t"}, [{"task": "t"}], []], ["t", 3, ["t"]]),
        ("or_default(float)", [None, 0.5, 2], ["fast", [1.0]]),
        ("or_default(str)", [None, "out/x"], [3, ["out/x"]]),
    ],
)
def test_the_form_and_the_flow_accept_the_same_values(name, accepted, refused):
    """flows/params.py writes the form's schema of a union by hand: it must accept exactly what the
    type accepts (the server checks a deployment run with the schema, the flow with the type)."""
    from prefect.utilities.schema_tools.validation import validate
    from pydantic import TypeAdapter, ValidationError

    from flows import params

    if name.startswith("or_default("):
        annotation = params.or_default({"float": float, "str": str}[name[11:-1]], "the default")
    else:
        annotation = getattr(params, name)
    adapter = TypeAdapter(annotation)
    schema = {"type": "object", "properties": {"x": adapter.json_schema()}}
    for value in accepted + refused:
        try:
            adapter.validate_python(value)
            by_type = True
        except ValidationError:
            by_type = False
        by_schema = not validate({"x": value}, schema)
        assert by_type == by_schema == (value in accepted), (value, by_type, by_schema)


def _rotations(properties: dict) -> list[dict]:
    """Parameter sets that together pick every value of every dropdown: set i takes value i of each
    (cycling); a multi-select (an array of an enum) takes all its values and none."""
    offered = {}
    for param, prop in properties.items():
        values = _offered(prop)
        if not values:
            continue
        offered[param] = [values, []] if prop.get("type") == "array" else values
    longest = max((len(values) for values in offered.values()), default=1)
    return [{param: values[i % len(values)] for param, values in offered.items()} for i in range(longest)]


def test_what_the_dropdowns_offer_starts_a_deployment_run():
    """Through the real (ephemeral) API: the deployments as `albert deploy` registers them, flow runs
    created with every value every dropdown offers (the server checks them against the deployment's
    schema, enforce_parameter_schema), and the flow's own check of those parameters when it starts."""
    from prefect.client.orchestration import get_client

    specs, pools = load_specs()
    specs = [s for s in specs if s.full_name in ("repretrain/sample", "pretrain/local", "promote/local")]
    ensure_pools(pools, os.path.join(REPO_ROOT, "infra"), log=lambda *_: None)
    ids = apply(specs, log=lambda *_: None)

    async def create(deployment_id: str, parameters: dict):
        async with get_client() as client:
            return await client.create_flow_run_from_deployment(deployment_id, parameters=parameters)

    async def read_schema(deployment_id: str) -> dict:
        async with get_client() as client:
            return (await client.read_deployment(deployment_id)).parameter_openapi_schema

    for spec in specs:
        schema = asyncio.run(read_schema(ids[spec.full_name]))  # what the UI draws the form from
        parameter_sets = _rotations(schema["properties"])
        if spec.flow.name != "promote":  # the other branches: a config file, a number of sequences, none
            parameter_sets.append({"config": "gs://bucket/albert_config.json", "micro_batch_size": 64})
            parameter_sets.append({"micro_batch_size": None, "lr": 1e-3})
        if spec.flow.name == "pretrain":
            parameter_sets.append({"device": "cuda:1", "deployment": "pretrain/gpu-rehearsal"})
        if spec.flow.name == "promote":  # under a lock-scope decorator (flows/prefect_run.py)
            parameter_sets.append({"max_batches": 2, "downstream": [{"task": "snownlp-sentiment"}]})
        required = {"pretrain": {"instances_dir": "out/instances/x"}, "promote": {"candidate": "c"}}.get(
            spec.flow.name, {}
        )
        for param, prop in schema["properties"].items():  # every value offered is tried
            tried = [p[param] for p in parameter_sets if param in p]
            tried = [v for t in tried for v in (t if isinstance(t, list) else [t])]
            assert all(v in tried for v in _offered(prop)), param
        required = {"pretrain": {"instances_dir": "out/instances/x"}, "promote": {"candidate": "c"}}.get(
            spec.flow.name, {}
        )
        for parameters in parameter_sets:
            parameters = {**required, **parameters}
            run = asyncio.run(create(ids[spec.full_name], parameters))
            assert {k: run.parameters[k] for k in parameters} == parameters
            # the flow run's own check when it starts, which keeps every value as it is ("auto", 64)
            validated = spec.flow.validate_parameters({**spec.parameters, **parameters})
            assert {k: validated[k] for k in parameters} == parameters
        with pytest.raises(Exception, match="max_batches|micro_batch_size"):
            bad = {"max_batches": "all"} if spec.flow.name == "promote" else {"micro_batch_size": "max"}
            asyncio.run(create(ids[spec.full_name], {**required, **bad}))

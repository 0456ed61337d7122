"""Prefect runs as every flow here uses them: @flow and @task with JSON results, a failure artifact,
and for stage tasks the retry policy (flows/retry.py); the run logger and the flow run id."""

from __future__ import annotations

import inspect
import json
import logging
import typing
from typing import Any

from prefect import Flow, get_run_logger
from prefect.context import FlowRunContext, TagsContext, TaskRunContext

from flows.failure_artifacts import flow_failure_artifact, task_failure_artifact
from flows.retry import retry_transient
from flows.run_names import current_run_name, run_tags

# Cached and persisted results (e.g. an evaluation reused across runs) are written as JSON, never pickle:
# a result store that someone else can write to must not be able to run code here.
RESULTS = "json"


def stage_flow(name: str):
    """Prefect's @flow as every flow here uses it: a failure artifact, JSON results, runs named from
    their parameters and tagged with their stage and storage kind (flows/run_names.py), annotations
    evaluated (`evaluated_annotations`)."""

    def decorate(fn):
        return StageFlow(
            evaluated_annotations(fn),
            name=name,
            flow_run_name=current_run_name(name),
            on_failure=[flow_failure_artifact],
            result_serializer=RESULTS,
        )

    return decorate


class StageFlow(Flow):
    """A Flow whose runs, when called (a top-level run or a subflow), carry the stage's tags: the tags
    context is entered around the call, so the run and every run it starts get them. A run started by
    a deployment gets the deployment's tags instead (infra/prefect.yaml)."""

    def __call__(self, *args: Any, **kwargs: Any):
        signature = inspect.signature(self.fn)
        params = {k: v for k, v in kwargs.items() if k in signature.parameters}  # not return_state, wait_for
        bound = signature.bind_partial(*args, **params).arguments
        # The parent's stage tag is replaced, not added to: a corpus run under repretrain is stage:corpus.
        inherited = {t for t in TagsContext.get().current_tags if not t.startswith("stage:")}
        with TagsContext(current_tags=inherited | set(run_tags(self.name, bound))):
            return super().__call__(*args, **kwargs)


def plain(value: Any) -> Any:
    """A copy of a subflow's result (JSON types) that Prefect does not link to the run that returned it.

    Prefect remembers each result by object identity and records a later task's or subflow's input that
    is one of them as an input of type "flow_run". Prefect 3.8.8's UI cannot read that type ("Invalid
    TaskInputResponse" in the browser console): the parent run's Task Runs tab said "4 Task runs", then
    "No task runs". Equal values in new objects carry no such link (the price: no arrows between the
    stages in the run graph)."""
    return json.loads(json.dumps(value))


def evaluated_annotations(fn):
    """`fn`, its parameter annotations evaluated in its own module. Prefect checks a run's parameters
    against the annotations of the function it is given, resolving their names in that function's
    globals: for a flow under another decorator (promote's lock scope) those are the decorator's
    module's, where the parameter types of flows/params.py are unknown and every run would fail."""
    target = inspect.unwrap(fn)
    target.__annotations__ = typing.get_type_hints(target, include_extras=True)
    return fn


def stage_task(name: str, backoff_factor: float = 30, retries: int = 2, **options: Any):
    """Prefect's @task with the stages' policy: `retries` retries after a jittered exponential backoff,
    for transient errors only (retry_transient), and a failure artifact. `options` go to @task too
    (e.g. cache_policy)."""
    from prefect import task
    from prefect.tasks import exponential_backoff

    return task(
        name=name,
        result_serializer=RESULTS,
        retries=retries,
        retry_delay_seconds=exponential_backoff(backoff_factor=backoff_factor),
        retry_jitter_factor=0.5,
        retry_condition_fn=retry_transient,
        on_failure=[task_failure_artifact],
        **options,
    )


def flow_run_id() -> str | None:
    """The id of the flow run this code runs in (from a flow or one of its tasks), else None."""
    flow_context = FlowRunContext.get()
    if flow_context and flow_context.flow_run:
        return str(flow_context.flow_run.id)
    task_context = TaskRunContext.get()
    if task_context and task_context.task_run.flow_run_id:
        return str(task_context.task_run.flow_run_id)
    return None


def logger():
    """The run logger inside a flow or task; a module logger when called outside of one (task.fn())."""
    try:
        return get_run_logger()
    except Exception:  # noqa: BLE001 - MissingContextError outside a run
        return logging.getLogger("flows")

"""Prefect runs as every flow here uses them: @flow and @task with JSON results, a failure artifact,
and for stage tasks the retry policy (flows/retry.py); the run logger and the flow run id."""

from __future__ import annotations

import inspect
import logging
import typing
from typing import Any

from prefect import get_run_logger
from prefect.context import FlowRunContext, TaskRunContext

from flows.failure_artifacts import flow_failure_artifact, task_failure_artifact
from flows.retry import retry_transient

# Cached and persisted results (e.g. an evaluation reused across runs) are written as JSON, never pickle:
# a result store that someone else can write to must not be able to run code here.
RESULTS = "json"


def stage_flow(name: str):
    """Prefect's @flow as every flow here uses it: a failure artifact, JSON results, annotations
    evaluated (`evaluated_annotations`)."""
    from prefect import flow

    decorate = flow(name=name, on_failure=[flow_failure_artifact], result_serializer=RESULTS)
    return lambda fn: decorate(evaluated_annotations(fn))


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

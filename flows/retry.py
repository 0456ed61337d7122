"""The retry policy of every stage task: retry what another attempt can fix (I/O, network, a killed
worker, a trainer that died with a signal), never bad input or a bug."""

from __future__ import annotations

from core.errors import UserError
from flows.stage_process import StageProcessError

# Failures that a retry cannot fix: bad input or a bug. Everything else is retried with exponential
# backoff (flows/prefect_run.py stage_task).
NOT_TRANSIENT = (
    UserError,
    ValueError,
    TypeError,
    KeyError,
    AttributeError,
    AssertionError,
    ImportError,
    NotImplementedError,
)


def retry_transient(task, task_run, state) -> bool:
    """`retry_condition_fn` of every stage task: retry I/O and process failures, never bad input."""
    exc = state.data if isinstance(state.data, BaseException) else None
    if exc is None:
        try:
            exc = state.result(raise_on_failure=False)
        except Exception:  # noqa: BLE001 - no readable exception: retry, the failure is not ours to judge
            return True
    if isinstance(exc, StageProcessError) and exc.returncode == 2:
        return False  # `albert` exits 2 on bad arguments and UserErrors: a rerun fails the same way
    return not isinstance(exc, NOT_TRANSIENT)

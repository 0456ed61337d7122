"""How hard a request to an object store tries before the command gives up: a timeout per request and
retries with exponential backoff.

    --storage-timeout 30    seconds a request may go without a byte from the store (connecting, or
                            waiting for the next part of an answer) before it counts as failed
    --storage-retries 5     further attempts of a request that failed in a way another attempt may
                            fix: a timeout, a reset or refused connection, 408, 429, 5xx
    --storage-backoff 1     seconds before the first retry; each retry waits twice the one before
                            (at most 32 s), less up to half of it at random so that many workers
                            that failed together do not retry together

The defaults suit Dataflow workers reading and writing GCS: Google's advice for its JSON API is
exponential backoff from 1 s, and a request that stays silent for 30 s is not slow but lost (an
answer streams bytes all along). A request that never succeeds fails in at most (retries + 1) x
timeout + the waits: 3.5 minutes with the defaults, where a stalled read used to hang the stage
until someone killed it.

The policy lives in the environment (ALBERT_STORAGE_TIMEOUT, ALBERT_STORAGE_RETRIES,
ALBERT_STORAGE_BACKOFF), so that the processes a command starts (Beam workers, torchrun, a flow's
stage processes) use the one it was given; `albert` sets them from its options. Workers on other
machines (Dataflow) do not inherit this environment: they use the defaults, or the variables their
worker image sets.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass

from core.errors import UserError

BACKOFF_MAX_S = 32.0
ENV = {
    "timeout_s": "ALBERT_STORAGE_TIMEOUT",
    "retries": "ALBERT_STORAGE_RETRIES",
    "backoff_s": "ALBERT_STORAGE_BACKOFF",
}
FLAGS = {"timeout_s": "--storage-timeout", "retries": "--storage-retries", "backoff_s": "--storage-backoff"}


@dataclass(frozen=True)
class RequestPolicy:
    timeout_s: float = 30.0
    retries: int = 5
    backoff_s: float = 1.0

    def __post_init__(self) -> None:
        if not self.timeout_s > 0:
            raise UserError(f"{FLAGS['timeout_s']} must be more than 0 seconds, got {self.timeout_s:g}")
        if self.retries < 0:
            raise UserError(f"{FLAGS['retries']} must be 0 or more, got {self.retries}")
        if self.backoff_s < 0:
            raise UserError(f"{FLAGS['backoff_s']} must be 0 or more seconds, got {self.backoff_s:g}")

    def wait(self, retry: int) -> float:
        """Seconds to wait before retry number `retry` (0: the first)."""
        full = min(BACKOFF_MAX_S, self.backoff_s * 2**retry)
        return full * random.uniform(0.5, 1.0)

    def settings(self) -> str:
        """The options that set this policy, as a user would give them (for the line of a failure)."""
        return (
            f"{FLAGS['retries']} {self.retries}, {FLAGS['timeout_s']} {self.timeout_s:g}, "
            f"{FLAGS['backoff_s']} {self.backoff_s:g}"
        )


def _from_env(name: str, kind: type, default):
    raw = os.environ.get(ENV[name])
    if raw is None or raw == "":
        return default
    try:
        return kind(raw)
    except ValueError:
        raise UserError(f"{ENV[name]}={raw!r} is not a number (it sets {FLAGS[name]})") from None


def current() -> RequestPolicy:
    """The policy of this process: the environment's, else the defaults."""
    defaults = RequestPolicy()
    return RequestPolicy(
        timeout_s=_from_env("timeout_s", float, defaults.timeout_s),
        retries=_from_env("retries", int, defaults.retries),
        backoff_s=_from_env("backoff_s", float, defaults.backoff_s),
    )


def configure(policy: RequestPolicy) -> None:
    """Make `policy` this process's and its children's (the environment they inherit)."""
    for name, var in ENV.items():
        os.environ[var] = repr(getattr(policy, name))


def add_arguments(parser) -> None:
    """The policy's options, for every `albert` command (flows/cli.py)."""
    defaults = RequestPolicy()
    group = parser.add_argument_group(
        "object stores (gs://, s3://): how hard a request tries (docs/storage.md)"
    )
    group.add_argument(
        FLAGS["timeout_s"],
        dest="storage_timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help=f"a request silent this long failed and is retried (default {defaults.timeout_s:g}; {ENV['timeout_s']})",
    )
    group.add_argument(
        FLAGS["retries"],
        dest="storage_retries",
        type=int,
        default=None,
        metavar="N",
        help=f"further attempts of a request that may pass (default {defaults.retries}; {ENV['retries']})",
    )
    group.add_argument(
        FLAGS["backoff_s"],
        dest="storage_backoff",
        type=float,
        default=None,
        metavar="SECONDS",
        help=f"wait before the first retry, doubled each time up to {BACKOFF_MAX_S:g} "
        f"(default {defaults.backoff_s:g}; {ENV['backoff_s']})",
    )


def configure_from_args(args) -> None:
    """Apply the options a command was given (over the environment's policy), for it and its
    children. UserError for a value out of range."""
    base = current()
    configure(
        RequestPolicy(
            timeout_s=base.timeout_s if args.storage_timeout is None else args.storage_timeout,
            retries=base.retries if args.storage_retries is None else args.storage_retries,
            backoff_s=base.backoff_s if args.storage_backoff is None else args.storage_backoff,
        )
    )

"""Errors every stage shares. `model` and `flows` import this too (it has no dependencies)."""

from __future__ import annotations

import signal


class UserError(Exception):
    """An expected failure caused by the user's input (a missing path, a bad option value).

    The `albert` command prints it as one line (no traceback) and exits with code 2.
    """


class StageFailed(UserError):
    """A stage that ran and must not produce an output: its accounting does not balance, too much of
    its input went to the dead letter, its input was empty. One line, exit code 1, no manifest."""


class Interrupted(BaseException):
    """A signal stopped the command: SIGTERM (a cancelled Prefect run, a preempted VM, Kubernetes) or
    SIGINT (Ctrl-C). The `albert` command prints the message as one line and exits 128 + the signal's
    number (143 for SIGTERM, 130 for SIGINT).

    A BaseException, like KeyboardInterrupt, so that no `except Exception` on the way swallows it, while
    `finally` blocks and `except BaseException` clean-ups still run. The message says what was kept
    (`albert pretrain`: the checkpoint it wrote) and how to go on."""

    def __init__(self, signum: int, message: str = ""):
        self.signum = int(signum)
        super().__init__(message or f"stopped by {signal.Signals(self.signum).name}")

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class StorageFailed(Exception):
    """A read or write that failed for good during the work: a request to a store that kept failing
    through its retries or timed out (core/storage/gcs.py), an input that could not be read, or one
    that changed or vanished after it was hashed (core/storage/inputs.py). `albert` prints it as one
    line, `albert CMD: failed: ...`, exit 1; a stage that meets it writes no manifest.

    Not an OSError on purpose: the readers take an OSError from a decompressor for damaged content (a
    dead letter), and a failed transfer says nothing about the content. Not a UserError either: a
    retried Prefect task may succeed (flows/retry.py)."""

    def __init__(self, doing: str, path: str, reason: str, hint: str = ""):
        self.doing, self.path, self.reason, self.hint = doing, path, reason, hint
        head = f"{doing} {path}: {reason}" if path else reason  # no path: the line as it came
        super().__init__(head + (f"; {hint}" if hint else ""))

    def __reduce__(self):  # crosses process boundaries (Beam workers) with its fields
        return type(self), (self.doing, self.path, self.reason, self.hint)

    def at(self, path: str, doing: str) -> StorageFailed:
        """The same failure named by the caller, who knows the path and what it was doing better
        than a request's URL does (a resumable upload's URL names no object)."""
        return type(self)(doing, path, self.reason, self.hint)


class InputChanged(StorageFailed):
    """An input that is no longer the version that was hashed: overwritten, replaced or deleted
    between the hashing and the reading (core/storage/inputs.py)."""

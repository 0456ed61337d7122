"""Errors every stage shares. `model` and `flows` import this too (it has no dependencies)."""

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

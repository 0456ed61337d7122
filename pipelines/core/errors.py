"""Errors every stage shares. `model` and `flows` import this too (it has no dependencies)."""


class UserError(Exception):
    """An expected failure caused by the user's input (a missing path, a bad option value).

    The `albert` command prints it as one line (no traceback) and exits with code 2.
    """


class StageFailed(UserError):
    """A stage that ran and must not produce an output: its accounting does not balance, too much of
    its input went to the dead letter, its input was empty. One line, exit code 1, no manifest."""

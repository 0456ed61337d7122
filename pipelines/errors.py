"""Errors every stage shares. `model` and `flows` import this too (it has no dependencies)."""


class UserError(Exception):
    """An expected failure caused by the user's input (a missing path, a bad option value).

    The `albert` command prints it as one line (no traceback) and exits with code 2.
    """

"""Errors every stage shares. `model` and `flows` import this too (it has no dependencies)."""


class UserError(Exception):
    """An expected failure caused by the user's input (a missing path, a bad option value).

    The `albert` command prints it as one line (no traceback) and exits with code 2.
    """


class StageFailed(UserError):
    """A stage that ran and must not produce an output: its accounting does not balance, too much of
    its input went to the dead letter, its input was empty. One line, exit code 1, no manifest."""


def check_dead_letters(dead: dict[str, int], read: int, limit: float, unit: str, files: str, example) -> None:
    """StageFailed when the dead letter holds more than `limit` of the `read` records: a systematic error
    (a bug, the wrong input, the wrong options), not a few broken records. The message names the
    commonest reason, its count and `example(reason)` (where the first such record came from, or None).
    `unit`: "records" or "documents"; `files`: the dead-letter files, to look at."""
    total = sum(dead.values())
    if not read or total <= limit * read:
        return
    reason, n = sorted(dead.items(), key=lambda kv: (-kv[1], kv[0]))[0]
    where = example(reason)
    raise StageFailed(
        f"{total} of {read} {unit} ({total / read:.1%}) went to the dead letter, over "
        f"--max-dead-letter-fraction {limit:g}: commonest {reason} ({n})"
        + (f", e.g. {where}" if where else "")
        + f"; see {files}; fix the input, or raise --max-dead-letter-fraction; no manifest written"
    )

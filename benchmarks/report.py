"""What every `python -m ...bench...` module does at the end: print the table, save the JSON, and turn
a UserError into a one-line message (exit 2)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipelines.core.errors import UserError


def report(result: dict[str, Any], table: str, json_path: str | None) -> int:
    """Print `table`; write `result` as JSON to `json_path` when given. Returns exit code 0."""
    print(table)
    if json_path:
        Path(json_path).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


def module_main(
    prog: str,
    doc: str | None,
    add_arguments: Callable[[argparse.ArgumentParser], None],
    run: Callable[[argparse.Namespace], int],
) -> None:
    """`python -m prog`: parse, run, exit with its code (2 and one line on a UserError)."""
    parser = argparse.ArgumentParser(prog=f"python -m {prog}", description=(doc or "").splitlines()[0])
    add_arguments(parser)
    try:
        sys.exit(run(parser.parse_args()))
    except UserError as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        sys.exit(2)

"""What every benchmark module shares: the one `--json PATH` option, and what it does at the end:
print the table, save the JSON, and turn a UserError into a one-line message (exit 2)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core.errors import UserError


def add_json_argument(parser: argparse.ArgumentParser) -> None:
    """`--json PATH`, spelled the same in every benchmark (`args.json`: the path or None)."""
    parser.add_argument("--json", metavar="PATH", default=None, help="also write the figures as JSON here")


def write_json(result: Any, json_path: str | None) -> None:
    """Write `result` as indented JSON to `json_path` when given."""
    if json_path:
        Path(json_path).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


def report(result: dict[str, Any], table: str, json_path: str | None) -> int:
    """Print `table`; write `result` as JSON to `json_path` when given. Returns exit code 0."""
    print(table)
    write_json(result, json_path)
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

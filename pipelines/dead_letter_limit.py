"""The dead-letter limit of the corpus and instance stages.

Broken records go to the stage's dead letter (`rejected-*.jsonl.gz`, `skipped-*.jsonl.gz`: one JSON
record per line with its `reason` and `where`) and the run goes on. Past `--max-dead-letter-fraction`
of the records read it is a systematic error (a bug, the wrong input, the wrong options), not a few
broken records: the stage fails and names the commonest reason with an example.
"""

from __future__ import annotations

import gzip
import json

from core import storage
from core.errors import StageFailed


def first_dead_letter(pattern: str, reason: str) -> str | None:
    """`where (detail)` of the first dead letter of `reason` in the files `pattern` matches. Records
    marked "dead_letter": false (the corpus's filtered documents share its files) are not."""
    for path in storage.glob(pattern):
        for line in gzip.decompress(storage.read_bytes(path)).decode("utf-8").splitlines():
            rec = json.loads(line)
            if rec.get("reason") == reason and rec.get("dead_letter", True):
                detail = rec.get("detail") or ""
                cut = detail[:120] + ("..." if len(detail) > 120 else "")
                return f"{rec.get('where')}" + (f" ({cut})" if detail else "")
    return None


def check_dead_letter_limit(
    dead: dict[str, int], read: int, limit: float, unit: str, files: str, note: str = ""
) -> None:
    """StageFailed when the dead letter (`dead`: count by reason) holds more than `limit` of the `read`
    records. `unit`: "records" or "documents"; `files`: the glob of the dead-letter files; `note`:
    said before them (the corpus stage: what damaged input lost, per file)."""
    total = sum(dead.values())
    if not read or total <= limit * read:
        return
    reason, n = sorted(dead.items(), key=lambda kv: (-kv[1], kv[0]))[0]
    where = first_dead_letter(files, reason)
    raise StageFailed(
        f"{total} of {read} {unit} ({total / read:.1%}) went to the dead letter, over "
        f"--max-dead-letter-fraction {limit:g}: commonest {reason} ({n})"
        + (f", e.g. {where}" if where else "")
        + (f"; {note}" if note else "")
        + f"; see {files}; fix the input, or raise --max-dead-letter-fraction; no manifest written"
    )

"""What fails a corpus run whatever the dead-letter fraction: an input that was not read, or not as
it was hashed, and a loss whose size nobody knows.

- An input that could not be read (a download that failed through every retry, an object deleted
  during the run) or that changed after it was hashed is not a broken record among good ones: the
  corpus would publish under the input's hash documents of another content, or none of it, and a
  rerun would call that corpus up to date. The run fails naming the input and the error
  (readers/error_records.py FAILED_INPUT, core/storage/inputs.py).
- A compressed file that ends early (a cut download) lost what followed the cut, which is not in
  the file: counted as one record it passed any limit (a `.jsonl.gz` cut at half its records lost
  half of them as "1 record"). No estimate is honest there: the size the file should have is known
  nowhere. So the run fails naming the file and where its data stops, unless --accept-cut-inputs
  (publish what the file held; its loss is counted as of unknown size, as before).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable

from core import storage
from core.errors import StageFailed
from pipelines.corpus.readers.error_records import FAILED_INPUT


def first_record(pattern: str, wanted: Callable[[dict], bool]) -> dict | None:
    """The first record of the dead-letter files `pattern` matches that `wanted` accepts."""
    for path in storage.glob(pattern):
        for line in gzip.decompress(storage.read_bytes(path)).decode("utf-8").splitlines():
            rec = json.loads(line)
            if wanted(rec):
                return rec
    return None


def check_inputs(stats: dict, out_dir: str, lost: dict, accept_cut_inputs: bool = False) -> None:
    """StageFailed for an input not read as hashed, or (unless accept_cut_inputs) a loss of unknown
    size (module docstring); `lost`: accounting.lost_summary of the stats."""
    pattern = storage.join(out_dir, "rejected-*.jsonl.gz")
    failed = sum(stats["dead_letter"].get(reason, 0) for reason in FAILED_INPUT)
    if failed:
        rec = first_record(pattern, lambda r: r.get("reason") in FAILED_INPUT) or {}
        more = f" (and {failed - 1} more inputs: see {pattern})" if failed > 1 else ""
        detail = rec.get("detail") or f"an input could not be read; see {pattern}"
        raise StageFailed(f"{detail}{more}; no manifest written")
    unknown = sorted(key for key, entry in lost.items() if entry.get("rest_unknown"))
    if unknown and not accept_cut_inputs:
        rec = first_record(pattern, lambda r: bool((r.get("lost") or {}).get("rest_unknown"))) or {}
        where = rec.get("where") or unknown[0]
        also = f" ({len(unknown) - 1} more files too)" if len(unknown) > 1 else ""
        raise StageFailed(
            f"{where}: the file ends early (a cut download?) and reading stopped there: what followed "
            f"is not in the file, so how much it lost cannot be counted{also}; check it (gzip -t, "
            f"bzip2 -t) and fetch it again, or pass --accept-cut-inputs to publish what it held; "
            f"no manifest written"
        )

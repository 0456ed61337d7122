"""Error records: what a reader yields for what it cannot read (the corpus stage's dead letter).

Damaged input (a cut download, a bad disk) loses records that were never read. Their dead letters
say how much was lost, in a `lost` field:

    {"file": KIND:NAME, "records": n, "estimated": bool, "bytes": b, "rest_unknown": bool}

`records`: how many records the dead letter stands for; the stage counts it n times in `read` and in
`dead_letter`, so a damaged file counts against --max-dead-letter-fraction by what it lost, not as
one error. Exact where the records are known (a multistream dump with its index: one dead letter per
page of a damaged stream, with its id and title, `records` 1); otherwise `estimated`: the compressed
bytes lost times the records per compressed byte read before in that work item, at least 1.
`bytes`: compressed bytes that could not be read. `rest_unknown`: the file ends early, so what
followed is not in it and cannot be counted.
"""

from __future__ import annotations

import zlib

from core.errors import InputChanged, StorageFailed
from pipelines.corpus.readers.ids import file_key

# A damaged file: bad gzip/bz2 headers or CRCs (OSError), a stream that ends early (EOFError), corrupt
# deflate data (zlib.error). Never a read that failed: core.storage.open_input raises StorageFailed.
STREAM_ERRORS = (OSError, EOFError, zlib.error)
# An input that could not be read, or not as it was hashed: no dead letter among others, a failed run
# whatever --max-dead-letter-fraction says (accounting.check_outcome). A rerun reads it again.
UNREADABLE, CHANGED = "unreadable_input", "changed_input"
FAILED_INPUT = (UNREADABLE, CHANGED)
RAW_EXCERPT = 500


def error_record(item: dict, where: str, error: str, detail: str, raw: bytes | str = b"") -> dict:
    """The dead-letter record of what `item` could not give at `where`: the reason (`error`), a
    detail, and an excerpt of the raw bytes."""
    if isinstance(raw, bytes):
        raw = raw[:RAW_EXCERPT].decode("utf-8", errors="replace")
    return {
        "source": item["kind"],
        "where": where,
        "error": error,
        "detail": detail[:300],
        "raw": raw[:RAW_EXCERPT],
    }


def lost_record(
    item: dict,
    where: str,
    error: str,
    detail: str,
    *,
    records: int,
    estimated: bool,
    nbytes: int,
    rest_unknown: bool = False,
    doc_id: str | None = None,
    title: str = "",
) -> dict:
    """The dead letter of records lost to damaged input (module docstring)."""
    rec = error_record(item, where, error, detail)
    rec["lost"] = {
        "file": file_key(item),
        "records": records,
        "estimated": estimated,
        "bytes": nbytes,
        "rest_unknown": rest_unknown,
    }
    if doc_id is not None:
        rec["id"], rec["title"] = doc_id, title
    return rec


def estimate(nbytes: int, records: int, read_bytes: int) -> int:
    """Records in `nbytes` compressed bytes, at the rate of `records` in `read_bytes`: at least 1."""
    if records <= 0 or read_bytes <= 0:
        return 1
    return max(1, round(nbytes * records / read_bytes))


def rest_lost(item: dict, where: str, err: BaseException, records: int, done: int, end: int) -> dict:
    """The dead letter of the rest of a work item that stopped at `err`: `records` records were
    yielded, from the first `done` bytes of the file (from the item's start; bytes after them gave no
    record), the item ends at byte `end`. A damaged stream cannot be resumed: the bytes from `done`
    to `end` are lost, and the records they held estimated at the rate of those read. A file that
    ends early (EOFError) also lost a rest that is not in it (`rest_unknown`)."""
    nbytes = max(0, end - (item.get("start", 0) + done))
    lost = estimate(nbytes, records, done)
    if records == 0:
        what = f"{nbytes} bytes lost, at least 1 record (none was read to estimate from)"
    elif nbytes == 0:
        what = "at least 1 record lost"
    else:
        what = f"{nbytes} bytes lost, about {lost} records at the rate of the {records} read"
    if isinstance(err, EOFError):
        what += "; the file ends early: what followed is not in it"
    return lost_record(
        item,
        where,
        stream_error(err),
        f"{type(err).__name__}: {err}; {what}",
        records=lost,
        estimated=True,
        nbytes=nbytes,
        rest_unknown=isinstance(err, EOFError),
    )


def failed_input(err: StorageFailed) -> dict:
    """What an item carries when its input could not be read (read_work turns it into a record)."""
    return {
        "error": CHANGED if isinstance(err, InputChanged) else UNREADABLE,
        "path": err.path,
        "detail": str(err),
    }


def failed_input_record(item: dict, failed: dict) -> dict:
    """The record of an input that could not be read: the stage fails on it (FAILED_INPUT), naming
    the input and the error in full (not cut as a dead letter's detail is)."""
    rec = error_record(item, failed["path"], failed["error"], "")
    rec["detail"] = failed["detail"]
    return rec


def stream_error(err: BaseException) -> str:
    """The reason of a file that could not be read to its end."""
    if isinstance(err, EOFError):
        return "truncated_input"
    if isinstance(err, (FileNotFoundError, PermissionError, IsADirectoryError)):
        return UNREADABLE  # gone or not readable by the worker: not the file's content
    return "corrupt_input"

"""Error records: what a reader yields for what it cannot read (the corpus stage's dead letter)."""

from __future__ import annotations

import zlib

# A damaged file: bad gzip/bz2 headers or CRCs (OSError), a stream that ends early (EOFError), corrupt
# deflate data (zlib.error). It becomes ONE dead letter naming the file and where reading stopped
# (what was read before is kept): a raw dump is big and often partly broken, and the share of dead
# letters (--max-dead-letter-fraction) decides whether the corpus is published.
STREAM_ERRORS = (OSError, EOFError, zlib.error)
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


def stream_error(err: BaseException) -> str:
    """The reason of a file that could not be read to its end."""
    if isinstance(err, EOFError):
        return "truncated_input"
    if isinstance(err, (FileNotFoundError, PermissionError, IsADirectoryError)):
        return "unreadable_input"  # gone or not readable by the worker: not the file's content
    return "corrupt_input"

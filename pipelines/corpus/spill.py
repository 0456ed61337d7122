"""Spill files: how a document's text crosses the corpus stage without crossing a shuffle.

A Beam runner materialises what goes through a shuffle (the local runner keeps it in memory, Dataflow
on its shuffle service), so the cost of the corpus stage is what travels. Cleaned documents do not
travel: the cleaning step appends each one to a spill file and sends on only its handle
(spill file, position) with its fingerprints. Once deduplication has decided every document's fate, a
final pass reads each spill file back, applies the verdicts and writes, per output shard, one sorted
piece file; each shard is then a streaming merge of its pieces. Peak memory per worker is one spill
file's verdicts and kept documents, whatever the size of the corpus.

Files (all under the stage's `_tmp/` folder, removed when the stage succeeds):

    spill/<uuid>-<n>.jsonl                   cleaned documents, one JSON object per line
    pieces/<prefix>-<shard>/<spill>.jsonl    output records of one shard from one spill file, sorted

A spill file is closed before its bundle's outputs are committed (finish_bundle), so a runner that
retries a bundle leaves an orphan file nobody refers to, never a half-read one.
"""

from __future__ import annotations

import heapq
import json
import uuid
from collections.abc import Iterable, Iterator

from pipelines.core import storage

SPILL_DIR = "spill"
PIECES_DIR = "pieces"
# A spill file rolls over at this many bytes: the final pass holds one file's kept documents (sorted
# per shard) in memory, so this bounds a worker's memory there.
SPILL_FILE_BYTES = 32 << 20


def dumps(record: dict) -> str:
    """The one JSON form of a record (shards, pieces, spill files): compact, UTF-8, key order kept."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


class SpillWriter:
    """Appends records to rolling spill files under `folder`; `add` returns the record's handle
    (file name, line index). Call `close` before the handles are used."""

    def __init__(self, folder: str, max_bytes: int = SPILL_FILE_BYTES):
        self.folder, self.max_bytes = folder, max_bytes
        self.prefix = uuid.uuid4().hex
        self.count = 0
        self.file = None
        self.name = ""
        self.lines = 0
        self.bytes = 0

    def _open(self) -> None:
        self.name = f"{self.prefix}-{self.count:05d}.jsonl"
        self.count += 1
        self.file = storage.open_write(storage.join(self.folder, self.name))
        self.lines = self.bytes = 0

    def add(self, record: dict) -> tuple[str, int]:
        if self.file is None or self.bytes >= self.max_bytes:
            self.close()
            self._open()
        data = dumps(record).encode("utf-8") + b"\n"
        self.file.write(data)
        self.bytes += len(data)
        self.lines += 1
        return self.name, self.lines - 1

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None


def read_spill(folder: str, name: str) -> Iterator[dict]:
    """The records of one spill file, in the order they were added (line index = position)."""
    with storage.open_read(storage.join(folder, name)) as f:
        for line in f:
            yield json.loads(line)


def piece_path(folder: str, prefix: str, shard: int, spill_name: str) -> str:
    return storage.join(folder, PIECES_DIR, f"{prefix}-{shard:05d}", spill_name)


def write_piece(path: str, lines: list[str]) -> None:
    """One piece: the given record lines (already in output order), newline-terminated."""
    storage.write_bytes(path, "".join(line + "\n" for line in lines).encode("utf-8"))


def sort_key(line: str) -> tuple[str, str]:
    """Output order of records: by id, then by the whole line (equal ids only in rejected shards)."""
    return str(json.loads(line)["id"]), line


def _piece_lines(path: str) -> Iterator[str]:
    with storage.open_read(path) as f:
        for raw in f:
            yield raw.decode("utf-8").rstrip("\n")


def merge_pieces(paths: Iterable[str]) -> Iterator[str]:
    """The lines of sorted pieces as one sorted stream; one line per piece in memory at a time."""
    return heapq.merge(*(_piece_lines(p) for p in sorted(paths)), key=sort_key)

"""Spill files: how a document's text crosses the corpus stage without crossing a shuffle.

A Beam runner materialises what goes through a shuffle (the local runner keeps it in memory, Dataflow
on its shuffle service), so the cost of the corpus stage is what travels. Cleaned documents do not
travel: the cleaning step appends each one to a spill file and sends on only its handle
(spill file, position) with its fingerprints. Once deduplication has decided every document's fate, a
final pass reads each spill file back, applies the verdicts and writes, per output shard, one sorted
piece file; each shard is then a streaming merge of its pieces. Peak memory per worker is one spill
file's verdicts and kept documents, whatever the size of the corpus.

MinHash signatures take the same route: the cleaning step writes each document's signature to the
spill file's signature file, at the document's position, and near-duplicate search sends handles
(text hash, spill file, position) through its joins; a step that needs signatures groups its work by
spill file and reads that one file (a few MB) whole, in sequence, never by random access.

Files (all under the stage's `_tmp/` folder, removed when the stage succeeds):

    spill/<stem>.jsonl                       cleaned documents, one JSON object per line
    spill/<stem>.sig                         their signatures, fixed-size records in the same order
    pieces/<prefix>-<shard>/<stem>.jsonl     output records of one shard from one spill file, sorted

A spill file is closed before its bundle's outputs are committed (finish_bundle), so a runner that
retries a bundle leaves an orphan file nobody refers to, never a half-read one.
"""

from __future__ import annotations

import heapq
import json
import uuid
from collections.abc import Iterable, Iterator

from core import storage

SPILL_DIR = "spill"
PIECES_DIR = "pieces"
# A spill file rolls over at this many bytes: the final pass holds one file's kept documents (sorted
# per shard) in memory, so this bounds a worker's memory there.
SPILL_FILE_BYTES = 8 << 20


def dumps(record: dict) -> str:
    """The one JSON form of a record (shards, pieces, spill files): compact, UTF-8, key order kept."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


class SpillWriter:
    """Appends documents (and their signatures) to rolling spill files under `folder`; `add` returns
    the document's place (stem, position). Call `close` before the places are used."""

    def __init__(self, folder: str, max_bytes: int = SPILL_FILE_BYTES):
        self.folder, self.max_bytes = folder, max_bytes
        self.prefix = uuid.uuid4().hex[:16]
        self.count = 0
        self.file = self.sigs = None
        self.stem = ""
        self.lines = 0
        self.bytes = 0

    def _open(self) -> None:
        self.stem = f"{self.prefix}-{self.count:05d}"
        self.count += 1
        self.file = storage.open_write(storage.join(self.folder, self.stem + ".jsonl"))
        self.sigs = storage.open_write(storage.join(self.folder, self.stem + ".sig"))
        self.lines = self.bytes = 0

    def add(self, record: dict, signature: bytes) -> tuple[str, int]:
        if self.file is None or self.bytes >= self.max_bytes:
            self.close()
            self._open()
        data = dumps(record).encode("utf-8") + b"\n"
        self.file.write(data)
        self.sigs.write(signature)
        self.bytes += len(data)
        self.lines += 1
        return self.stem, self.lines - 1

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.sigs.close()
            self.file = self.sigs = None


def read_spill(folder: str, stem: str) -> Iterator[dict]:
    """The documents of one spill file, in the order they were added (line index = position)."""
    with storage.open_read(storage.join(folder, stem + ".jsonl")) as f:
        for line in f:
            yield json.loads(line)


class Signatures:
    """The signatures of one spill file, read whole: `sig(position)` -> bytes."""

    def __init__(self, folder: str, stem: str, size: int):
        self.size = size
        with storage.open_read(storage.join(folder, stem + ".sig")) as f:
            self.data = f.read()

    def sig(self, position: int) -> bytes:
        return self.data[position * self.size : (position + 1) * self.size]


def piece_path(folder: str, prefix: str, shard: int, spill_name: str) -> str:
    return storage.join(folder, PIECES_DIR, f"{prefix}-{shard:05d}", spill_name + ".jsonl")


def write_piece(path: str, lines: list[str]) -> None:
    """One piece: the given record lines (already in output order), newline-terminated."""
    storage.write_bytes(path, "".join(line + "\n" for line in lines).encode("utf-8"))


def _piece_records(path: str) -> Iterator[tuple[tuple[str, str], dict]]:
    """((id, line), record) per line of a piece: the output order (by id, then by the whole line) and
    the parsed record, from one parse."""
    with storage.open_read(path) as f:
        for raw in f:
            line = raw.decode("utf-8").rstrip("\n")
            record = json.loads(line)
            yield (str(record["id"]), line), record


def merge_pieces(paths: Iterable[str]) -> Iterator[tuple[str, dict]]:
    """(line, record) of sorted pieces as one sorted stream; one line per piece in memory at a time."""
    merged = heapq.merge(*(_piece_records(p) for p in sorted(paths)), key=lambda entry: entry[0])
    return ((key[1], record) for key, record in merged)

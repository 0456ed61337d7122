"""Pretraining instances (TFRecord, original ALBERT schema) -> batches of torch tensors, without TensorFlow.

Parsing. A `tf.train.Example` with fixed-length int64/float features is parsed in two steps: a small
Python scan per record finds where each feature's packed payload lies (8 map entries, a few dozen
byte reads), then each feature is decoded for the whole batch at once with numpy (one vectorised
varint decode over the concatenated payloads). Records written by TensorFlow's protobuf (the original
generator: any map order, packed lists) and by pipelines.tfexample (schema order) parse the same;
unpacked lists and unknown fields fall back to a general scanner. TensorFlow is never imported.

The stream (what one rank sees), for epoch e = 0, 1, 2, ...:

    files  -- permuted by rng(seed, e) (sorted order when shuffle_window <= 1)
    records of the files, in that order         global index g = 0, 1, ... (counted on across epochs)
    windows of `shuffle_window` records         window k permuted by rng(seed, e, k)
    the permuted records with g % world == rank  -> the rank's elements n = 0, 1, ... (across epochs)
    batches of `batch_size` elements            batch i = elements [i*b, (i+1)*b)
    loader worker w of W yields batches i with (i - first_batch) % W == w, so torch's DataLoader
    (round robin over workers) returns them in order i = first_batch, first_batch + 1, ...

So the global batch of a step (the rank batches of all ranks, or the micro-batches of gradient
accumulation) is the same set of records whatever the number of ranks, loader workers or
accumulation steps: a run on 2 ranks equals a run on one with the same global batch.

The shuffle is a window shuffle (fill a window, permute it, emit it) rather than a rolling buffer:
its state is a few counters, so the data position saved in a checkpoint is tiny and exact. Every batch
carries a `Position` (the bookmark of the window holding its first element: epoch, window, file index,
byte offset, element counters, plus the batch index); resuming from it re-reads at most one window.
All randomness is derived from (seed, epoch, window): there is no mutable RNG state to save.

Every rank and worker reads all the bytes of the stream (framing only) and decodes only its own
records. That keeps the global batch invariant; the framing costs ~1 µs per record.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import struct
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch

from pipelines.core import storage
from pipelines.core.errors import UserError
from pipelines.schema import FEATURES, feature_lengths

# Features the trainer needs (token_boundary is not decoded) and the names the model takes them by.
TORCH_NAMES: dict[str, str] = {
    "input_ids": "input_ids",
    "input_mask": "attention_mask",
    "segment_ids": "token_type_ids",
    "masked_lm_positions": "masked_lm_positions",
    "masked_lm_ids": "masked_lm_ids",
    "masked_lm_weights": "masked_lm_weights",
    "next_sentence_labels": "sentence_order_label",
}
_DTYPES = {f.name: f.dtype for f in FEATURES}
_KIND_INT, _KIND_FLOAT = 3, 2  # Feature.int64_list = 3, Feature.float_list = 2


# ---------------------------------------------------------------------------------------------------
# tf.train.Example parsing


class RecordError(UserError, ValueError):
    """A damaged TFRecord file, or a record that is not a tf.train.Example of the expected schema. A
    UserError: the command prints it as one line naming the file (the data is bad, not the code)."""


def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    result, shift = b & 0x7F, 7
    pos += 1
    while True:
        b = buf[pos]
        result |= (b & 0x7F) << shift
        pos += 1
        if b < 0x80:
            return result, pos
        shift += 7


def _skip_field(buf: bytes, pos: int, wire: int) -> int:
    if wire == 0:
        return _uvarint(buf, pos)[1]
    if wire == 1:
        return pos + 8
    if wire == 2:
        n, pos = _uvarint(buf, pos)
        return pos + n
    if wire == 5:
        return pos + 4
    raise RecordError(f"unsupported wire type {wire}")


def _fields(buf: bytes, pos: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """(field number, wire type, start, end) of each field's value bytes in buf[pos:end] (for a
    length-delimited field, without its length prefix)."""
    while pos < end:
        key, pos = _uvarint(buf, pos)
        field, wire = key >> 3, key & 7
        if wire == 2:
            n, pos = _uvarint(buf, pos)
            yield field, wire, pos, pos + n
            pos += n
        elif wire == 0:
            nxt = _uvarint(buf, pos)[1]
            yield field, wire, pos, nxt
            pos = nxt
        else:
            nxt = _skip_field(buf, pos, wire)
            yield field, wire, pos, nxt
            pos = nxt
    if pos != end:
        raise RecordError("truncated protobuf message")


def _scan_general(buf: bytes) -> dict[bytes, tuple[int, bytes]]:
    """name -> (kind, packed payload) for every feature, whatever the field order or packing."""
    out: dict[bytes, tuple[int, bytes]] = {}
    for field, wire, s, e in _fields(buf, 0, len(buf)):
        if field != 1 or wire != 2:
            continue  # Example.features
        for f2, w2, s2, e2 in _fields(buf, s, e):
            if f2 != 1 or w2 != 2:
                continue  # Features.feature map entry
            name, value = None, None
            for f3, w3, s3, e3 in _fields(buf, s2, e2):
                if f3 == 1 and w3 == 2:
                    name = buf[s3:e3]
                elif f3 == 2 and w3 == 2:
                    value = (s3, e3)
            if name is None or value is None:
                continue
            kind, chunks = 0, []
            for f4, _, s4, e4 in _fields(buf, *value):  # Feature: the oneof list
                kind = f4
                for f5, w5, s5, e5 in _fields(buf, s4, e4):  # Int64List / FloatList .value = 1
                    if f5 != 1:
                        continue
                    if w5 == 2:  # packed
                        chunks.append(buf[s5:e5])
                    elif w5 in (0, 5):  # one unpacked varint / fixed32 float: its bytes are the packed form
                        chunks.append(buf[s5:e5])
            out[name] = (kind, b"".join(chunks))
    return out


def _scan(buf: bytes) -> dict[bytes, tuple[int, bytes]]:
    """Fast path of _scan_general for the usual layout: Example{features{entry{key, value{list{packed}}}}}.

    Lengths below 128 (one varint byte) are read inline: this loop is the loader's hot spot."""
    try:
        if buf[0] != 0x0A:
            return _scan_general(buf)
        n, pos = _uvarint(buf, 1)
        end = pos + n
        if end != len(buf):
            return _scan_general(buf)
        out = {}
        uvarint = _uvarint
        while pos < end:
            if buf[pos] != 0x0A:  # Features.feature (1, LEN)
                return _scan_general(buf)
            n = buf[pos + 1]
            if n < 0x80:
                pos += 2
            else:
                n, pos = uvarint(buf, pos + 1)
            entry_end = pos + n
            if buf[pos] != 0x0A:  # entry.key first
                return _scan_general(buf)
            n = buf[pos + 1]  # names are short
            name = buf[pos + 2 : pos + 2 + n]
            pos += 2 + n
            if n >= 0x80 or buf[pos] != 0x12:  # entry.value
                return _scan_general(buf)
            n = buf[pos + 1]
            pos = pos + 2 if n < 0x80 else uvarint(buf, pos + 1)[1]
            kind = buf[pos] >> 3  # Feature oneof field number
            n = buf[pos + 1]
            if n < 0x80:
                pos += 2
            else:
                n, pos = uvarint(buf, pos + 1)
            list_end = pos + n
            if pos < list_end:
                if buf[pos] != 0x0A:  # packed .value
                    return _scan_general(buf)
                n = buf[pos + 1]
                pos = pos + 2 if n < 0x80 else uvarint(buf, pos + 1)[1]
            if list_end != entry_end:
                return _scan_general(buf)
            out[name] = (kind, buf[pos:list_end])
            pos = entry_end
        return out
    except IndexError:
        raise RecordError("truncated tf.train.Example") from None


def decode_varints(data: bytes | np.ndarray) -> np.ndarray:
    """Decode concatenated protobuf varints into int64 (two's complement, as int64 fields are)."""
    b = np.frombuffer(data, dtype=np.uint8) if isinstance(data, (bytes, bytearray, memoryview)) else data
    if not b.size:
        return np.zeros(0, dtype=np.int64)
    if b.max() < 0x80:  # fast path: every value fits in one byte (masks, segment ids, labels)
        return b.astype(np.int64)
    ends = np.flatnonzero(b < 0x80)
    if not len(ends) or ends[-1] != len(b) - 1:
        raise RecordError("truncated varint")
    starts = np.empty_like(ends)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    within = np.arange(len(b)) - np.repeat(starts, ends - starts + 1)  # byte index inside its varint
    if within.max() > 9:
        raise RecordError("varint longer than 10 bytes")
    parts = (b & 0x7F).astype(np.uint64) << (7 * within).astype(np.uint64)
    return np.add.reduceat(parts, starts).view(np.int64)  # bit groups do not overlap: sum == or


def _read_varints(buf: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Varints (up to 4 bytes: lengths < 2**28) starting at each of `pos` in `buf`.

    Returns (values, positions after them, ok). `buf` is padded so reads past a record stay in bounds."""
    b = buf[pos].astype(np.int64)
    value = b & 0x7F
    more = b >= 0x80
    size = np.ones_like(pos)
    for k in range(1, 4):
        if not more.any():
            break
        bk = buf[pos + k * more].astype(np.int64)  # reads pos (harmless) where the varint already ended
        value |= np.where(more, (bk & 0x7F) << (7 * k), 0)
        size += more
        more = more & (bk >= 0x80)
    return value, pos + size, ~more


def _scan_batch(records: list[bytes], names: tuple[str, ...]):
    """Vectorised _scan over a batch: for every record and wanted feature, where its packed payload
    lies in the joined buffer. One numpy pass per map-entry slot (8 for the schema), not per record.

    Returns (buf, start (B, F), end (B, F), kind (B, F), ok (B,)); records that are not in the usual
    layout (ok False) are left to the general Python scanner."""
    B, F = len(records), len(names)
    lens = np.fromiter(map(len, records), dtype=np.int64, count=B)
    rec_end = np.cumsum(lens)
    rec_start = rec_end - lens
    limit = int(rec_end[-1]) if B else 0
    buf = np.frombuffer(b"".join(records) + bytes(64), dtype=np.uint8)
    width = max(map(len, names)) + 1
    table = np.zeros((F, width), dtype=np.uint8)
    for i, n in enumerate(names):
        table[i, : len(n)] = np.frombuffer(n.encode(), dtype=np.uint8)
    tlen = np.array([len(n) for n in names])
    start = np.full((B, F), -1, dtype=np.int64)
    end = np.full((B, F), -1, dtype=np.int64)
    kind = np.zeros((B, F), dtype=np.int64)

    def at(p):  # indices clamped into the padded buffer (malformed records may point past it)
        return np.minimum(p, limit)

    ok = buf[at(rec_start)] == 0x0A  # Example.features
    n, pos, good = _read_varints(buf, at(rec_start + 1))
    ok &= good & (pos + n == rec_end)
    for _ in range(256):
        active = np.flatnonzero(ok & (pos < rec_end))
        if not len(active):
            break
        p = at(pos[active])
        good = buf[p] == 0x0A  # Features.feature map entry
        n, p, g = _read_varints(buf, at(p + 1))
        entry_end = p + n
        good &= g & (buf[at(p)] == 0x0A)  # entry.key
        klen = buf[at(p + 1)].astype(np.int64)
        good &= klen < width
        p = at(p + 2)
        key = buf[at(p[:, None] + np.arange(width))] * (np.arange(width) < klen[:, None])
        match = (key[:, None, :] == table[None]).all(-1) & (klen[:, None] == tlen[None])  # (A, F)
        p = at(p + klen)
        good &= buf[p] == 0x12  # entry.value
        n, p, g = _read_varints(buf, at(p + 1))
        good &= g
        k = buf[at(p)].astype(np.int64) >> 3  # Feature oneof: 2 float_list, 3 int64_list
        n, p, g = _read_varints(buf, at(p + 1))
        good &= g
        list_end = p + n
        has = p < list_end
        good &= ~has | (buf[at(p)] == 0x0A)  # packed .value
        n2, p2, g = _read_varints(buf, at(p + 1))
        good &= ~has | (g & (p2 + n2 == list_end))
        good &= (list_end == entry_end) & (entry_end <= rec_end[active])
        payload = np.where(has, p2, p)
        rows, cols = np.nonzero(match & good[:, None])
        start[active[rows], cols] = payload[rows]
        end[active[rows], cols] = list_end[rows]
        kind[active[rows], cols] = k[rows]
        ok[active] &= good
        pos[active] = entry_end
    else:
        ok &= pos >= rec_end
    return buf, start, end, kind, ok


def _gather(buf: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The bytes buf[start[i]:end[i]] of every i, concatenated."""
    n = end - start
    idx = np.arange(int(n.sum())) + np.repeat(start - (np.cumsum(n) - n), n)
    return buf[idx]


def parse_examples(
    records: list[bytes], lengths: dict[str, int], names: tuple[str, ...] | None = None
) -> dict[str, np.ndarray]:
    """Parse serialised tf.train.Examples into {name: (B, length) array} (int64 or float32).

    `lengths` gives the fixed length of each wanted feature (pipelines.schema.feature_lengths); only
    `names` (default: all of `lengths`) are decoded. Raises RecordError on a missing feature, a wrong
    kind or a wrong length, naming the record."""
    names = tuple(lengths) if names is None else tuple(names)
    B = len(records)
    buf, start, end, kind, ok = _scan_batch(records, names)
    if not ok.all():  # unusual layouts: the general scanner, payloads copied into an extra buffer
        extra, base = [], len(buf)
        for i in np.flatnonzero(~ok).tolist():
            fields = _scan_general(records[i])
            for j, n in enumerate(names):
                got = fields.get(n.encode())
                if got is None:
                    start[i, j] = -1
                    continue
                kind[i, j], payload = got
                start[i, j], end[i, j] = base, base + len(payload)
                base += len(payload)
                extra.append(payload)
        buf = np.concatenate([buf, np.frombuffer(b"".join(extra), dtype=np.uint8)])
    out = {}
    for j, n in enumerate(names):
        if (start[:, j] < 0).any():
            raise RecordError(f"record {int(np.argmax(start[:, j] < 0))} has no feature {n!r}")
        want = _KIND_FLOAT if _DTYPES[n] == "float32" else _KIND_INT
        if (kind[:, j] != want).any():
            bad = int(np.argmax(kind[:, j] != want))
            raise RecordError(f"record {bad}: feature {n!r} is not a {_DTYPES[n]} list")
        L = lengths[n]
        data = _gather(buf, start[:, j], end[:, j])
        if _DTYPES[n] == "float32":
            values = data.view("<f4").astype(np.float32)
            counts = (end[:, j] - start[:, j]) // 4
        else:
            values = decode_varints(data)
            counts = None
        if values.size != B * L:
            if counts is None:
                counts = np.array([decode_varints(buf[s:e]).size for s, e in zip(start[:, j], end[:, j])])
            bad = int(np.argmax(counts != L))
            raise RecordError(f"record {bad}: feature {n!r} has {int(counts[bad])} values, expected {L}")
        out[n] = values.reshape(B, L)
    return out


def infer_lengths(record: bytes) -> tuple[int, int]:
    """(max_seq_length, max_predictions) of a record, from its input_ids and masked_lm_positions."""
    fields = _scan(record)
    try:
        L = decode_varints(fields[b"input_ids"][1]).size
        P = decode_varints(fields[b"masked_lm_positions"][1]).size
    except KeyError as err:
        raise RecordError(f"record has no feature {err.args[0].decode()!r}: not an ALBERT instance") from None
    return L, P


def to_torch(arrays: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    """Schema names -> the model's argument names; the SOP label becomes (B,)."""
    out = {TORCH_NAMES[k]: torch.from_numpy(v) for k, v in arrays.items() if k in TORCH_NAMES}
    if "sentence_order_label" in out:
        out["sentence_order_label"] = out["sentence_order_label"].reshape(-1)
    return out


# ---------------------------------------------------------------------------------------------------
# TFRecord files


def _masked_crc(data: bytes) -> int:
    import google_crc32c

    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _unmask_crc(masked: int) -> int:
    """The raw CRC32C whose masked form is `masked` (TFRecord stores masked CRCs)."""
    rot = (masked - 0xA282EAD8) & 0xFFFFFFFF
    return ((rot >> 17) | (rot << 15)) & 0xFFFFFFFF


_HEADER = struct.Struct("<QI")
_DAMAGED = " (the file is damaged, e.g. a copy cut short: rebuild or copy it again)"
_FOOTER = struct.Struct("<I")


def iter_records(path: str, offset: int = 0, verify: bool = True, chunk: int = 1 << 22):
    """(record bytes, byte offset of the NEXT record) for each record of a TFRecord file from `offset`.

    Reads in large chunks (few system calls); the length CRC is always checked, the data CRC when
    `verify` (a corrupt file is an error naming the file and byte offset, never a silent skip)."""
    import google_crc32c

    crc = google_crc32c.value
    header, footer = _HEADER.unpack_from, _FOOTER.unpack_from
    with storage.open_read(path) as f:
        f.seek(offset)
        buf, base, pos = b"", offset, 0  # buf[pos] is at file offset base + pos
        while True:
            if len(buf) - pos < 12:
                buf = buf[pos:] + f.read(chunk)
                base += pos
                pos = 0
                if not buf:
                    return
                if len(buf) < 12:
                    raise RecordError(f"{path}: truncated record header at byte {base}{_DAMAGED}")
            length, length_crc = header(buf, pos)
            if crc(buf[pos : pos + 8]) != _unmask_crc(length_crc):
                if base + pos == 0:
                    raise RecordError(
                        f"{path}: not a TFRecord file (its first record header does not check out)"
                    )
                raise RecordError(f"{path}: corrupt record length at byte {base + pos}{_DAMAGED}")
            end = pos + 12 + length
            if len(buf) < end + 4:
                buf = buf[pos:] + f.read(max(chunk, end + 4 - pos))
                base += pos
                end -= pos
                pos = 0
                if len(buf) < end + 4:
                    raise RecordError(f"{path}: truncated record at byte {base}{_DAMAGED}")
            data = buf[pos + 12 : end]
            if verify and crc(data) != _unmask_crc(footer(buf, end)[0]):
                raise RecordError(f"{path}: corrupt record data at byte {base + pos}{_DAMAGED}")
            pos = end + 4
            yield data, base + pos


@dataclass(frozen=True)
class InstanceFiles:
    """The TFRecord files of one split, with the fixed lengths of their features."""

    files: tuple[str, ...]
    max_seq_length: int
    max_predictions: int
    vocab_model: str | None = None
    """spm.model of the vocabulary the instances were built with (from manifest.json), if known."""
    num_records: int | None = None
    """Instances in the split, from the manifest (None for foreign files)."""
    vocab_sha256: str | None = None
    """sha256 of that spm.model when the instances were built (manifest.json; None for foreign files)."""
    content_id: str = ""
    """Identity of the data: for our folders a hash of the output hashes in manifest.json (instances
    rebuilt in place with another seed get another id); for foreign files a hash of their names and
    sizes. A resumed run must see the same id."""
    source: str = ""
    """The path the user gave (a folder, a glob, a file)."""
    foreign: bool = False
    """Named by a glob or a file path, not an instance folder: no manifest says which vocabulary built
    them, so the trainer needs --vocab."""

    @property
    def lengths(self) -> dict[str, int]:
        return feature_lengths(self.max_seq_length, self.max_predictions)


class NoSplit(UserError):
    """An instance folder without files of the split asked for (e.g. built with no eval split)."""


def find_instances(path: str, split: str = "train") -> InstanceFiles:
    """The files of `split` in an instance folder (ours: `{split}-*.tfrecord` + manifest.json), or the
    files a glob / single file names (e.g. the original generator's output, which has no manifest).

    A folder without manifest.json is an unfinished stage (docs/architecture.md) and is refused; so are the files
    of such a folder named through a glob (a glob must not be a way around the manifest)."""
    manifest = None
    foreign = storage.has_glob(path) or storage.isfile(path)
    if foreign:
        files = storage.glob(path)
        if not files:
            raise UserError(f"no TFRecord file matches {path}")
        for folder in sorted({storage.dirname(p) for p in files}):
            _refuse_unfinished(folder)
    else:
        if not storage.isdir(path):
            raise UserError(f"instance folder not found: {path}")
        _refuse_unfinished(path)
        manifest = _instances_manifest(path)
        if manifest is None:
            raise UserError(
                f"{path} has no manifest.json, so it is not a finished `albert instances` folder (for "
                f"TFRecords of another generator, pass a glob such as '{path}/*.tfrecord' and --vocab)"
            )
        files = storage.glob(storage.join(path, f"{split}-*.tfrecord"))
        _check_listed(path, split, files, manifest)
        if not files:
            raise NoSplit(f"{path} has no {split}-*.tfrecord files")
    first = None
    for p in files:
        first = next((r for r, _ in iter_records(p)), None)
        if first is not None:
            break
    if first is None:
        raise UserError(f"the {split} files under {path} hold no records")
    try:
        L, P = infer_lengths(first)
    except RecordError as err:
        raise RecordError(f"{p}: {err}") from None
    vocab = n = vocab_sha = None
    if manifest is not None:
        cfg = manifest.get("config", {})
        mL = cfg.get("packing", {}).get("max_seq_length")
        mP = cfg.get("masking", {}).get("max_predictions")
        if (mL, mP) != (L, P) and mL is not None:
            raise UserError(f"{path}: records have L={L}, P={P} but manifest.json says L={mL}, P={mP}")
        vocab = (manifest.get("vocab") or {}).get("path")
        vocab_sha = (manifest.get("vocab") or {}).get("sha256")
        n = ((manifest.get("summary") or {}).get(split) or {}).get("instances")
        identity = json.dumps(manifest.get("outputs"), sort_keys=True)
    else:
        identity = json.dumps([[storage.basename(p), storage.size(p)] for p in files])
        vocab_sha = _vocab_sha_of_folder(files)
    content_id = hashlib.sha256(identity.encode()).hexdigest()
    return InstanceFiles(tuple(files), L, P, vocab, n, vocab_sha, content_id, path, foreign)


def _instances_manifest(folder: str) -> dict | None:
    """manifest.json of a finished `albert instances` folder; None when there is none; a UserError when
    it is damaged or another stage's."""
    mpath = storage.join(folder, "manifest.json")
    if not storage.isfile(mpath):
        return None
    try:
        manifest = storage.read_json(mpath)
    except ValueError as err:
        raise UserError(
            f"{mpath} is not valid JSON ({err}): the folder is damaged; rerun `albert instances --out {folder}`"
        ) from None
    stage = manifest.get("stage") if isinstance(manifest, dict) else None
    if stage != "instances":
        raise UserError(
            f"{folder} holds the output of `albert {stage}`, not of `albert instances`; pass an instance folder"
        )
    return manifest


def _refuse_unfinished(folder: str) -> None:
    """Refuse a folder that one of our stages started to write and did not finish: its marker
    (pipelines.outdir) names a stage, or the instance stage's stats.json / skipped-* files are there, but
    manifest.json (written last) is not. Its TFRecords are a part of the data, whatever their names."""
    from pipelines import outdir

    entries = storage.listdir(folder)
    if "manifest.json" in entries:
        return
    stage = outdir.owner(folder) if outdir.MARKER in entries else None
    if stage is None and ("stats.json" in entries or any(n.startswith("skipped-") for n in entries)):
        stage = "instances"
    if stage:
        raise UserError(
            f"{folder} is an unfinished `albert {stage}` output (no manifest.json: that run stopped before "
            f"the end, its files are only part of the data); rerun `albert {stage}` with --out {folder}"
        )


def _check_listed(folder: str, split: str, files: list[str], manifest: dict) -> None:
    """The split's files must be those manifest.json lists (a file removed or added since, e.g. a partial
    copy, would silently train on other data)."""
    outputs = manifest.get("outputs")
    if not isinstance(outputs, dict):
        return  # a manifest written before outputs were recorded
    listed = {n for n in outputs if n.startswith(f"{split}-") and n.endswith(".tfrecord")}
    found = {storage.basename(p) for p in files}
    if listed != found:
        missing, extra = sorted(listed - found), sorted(found - listed)
        detail = "; ".join(
            part
            for part in (
                f"missing: {', '.join(missing[:3])}" if missing else "",
                f"not in the manifest: {', '.join(extra[:3])}" if extra else "",
            )
            if part
        )
        raise UserError(
            f"{folder}: the {split} files are not those its manifest.json lists ({detail}); copy the folder "
            f"again, or rerun `albert instances --out {folder}`"
        )


def _vocab_sha_of_folder(files: list[str]) -> str | None:
    """Files named by a glob inside one finished instance folder: that folder's vocabulary hash, so the
    vocabulary a run pairs them with is still checked."""
    folders = {storage.dirname(p) for p in files}
    if len(folders) != 1:
        return None
    try:
        manifest = _instances_manifest(folders.pop())
    except UserError:
        return None
    return ((manifest or {}).get("vocab") or {}).get("sha256")


def check_vocab(data: InstanceFiles, spm_path: str | None, what: str) -> None:
    """Refuse a vocabulary other than the one the instances were built with (manifest.json records its
    sha256). `what` names where `spm_path` comes from ("--vocab", "the checkpoint's spm.model", ...).
    Foreign TFRecords record no vocabulary: nothing to compare."""
    if data.vocab_sha256 is None:
        return
    if spm_path is None:
        raise UserError(
            f"{what} has no spm.model, so it cannot be checked against the vocabulary of {data.source}"
        )
    if not storage.isfile(spm_path):
        raise UserError(f"vocabulary not found: {spm_path}")
    digest = storage.sha256(spm_path)
    if digest != data.vocab_sha256:
        raise UserError(
            f"{what} ({spm_path}, sha256 {digest[:12]}) is not the vocabulary {data.source} was built "
            f"with (sha256 {data.vocab_sha256[:12]} in its manifest.json); use that vocabulary, or "
            f"rebuild the instances with this one"
        )


# ---------------------------------------------------------------------------------------------------
# The stream


@dataclass(frozen=True)
class Position:
    """Where a rank's stream is: the bookmark of a shuffle window and the next batch to produce.

    The stream restarts from here exactly (checkpointed as JSON)."""

    epoch: int = 0
    window: int = 0
    """Index of the window within the epoch."""
    file: int = 0
    """Index, in the epoch's file order, of the file where the window starts."""
    offset: int = 0
    """Byte offset in that file of the window's first record."""
    record: int = 0
    """Global index (all ranks, counted across epochs) of the window's first record."""
    element: int = 0
    """The rank's element counter (across epochs) at the window's start."""
    next_batch: int = 0
    """Index of the next batch to produce."""

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Position:
        return cls(**{f.name: int(d[f.name]) for f in dataclasses.fields(cls)})


def _mix(*values: int) -> list[int]:
    return [int(v) & 0xFFFFFFFF for v in values]


def file_order(num_files: int, seed: int, epoch: int, shuffle: bool) -> list[int]:
    if not shuffle:
        return list(range(num_files))
    return np.random.default_rng(_mix(seed, epoch, 0x46494C45)).permutation(num_files).tolist()


def window_order(size: int, seed: int, epoch: int, window: int, shuffle: bool) -> np.ndarray:
    if not shuffle:
        return np.arange(size)
    return np.random.default_rng(_mix(seed, epoch, window, 0x57494E44)).permutation(size)


class InstanceStream(torch.utils.data.IterableDataset):
    """Batches of one rank as (tensors, Position after the batch), see the module docstring.

    epochs=None streams forever (pretraining); epochs=1 with shuffle_window=0 is one ordered pass
    (evaluation), whose last batch may be short."""

    def __init__(
        self,
        data: InstanceFiles,
        batch_size: int,
        *,
        seed: int = 0,
        shuffle_window: int = 10_000,
        rank: int = 0,
        world_size: int = 1,
        start: Position | None = None,
        epochs: int | None = None,
        verify: bool = True,
        names: tuple[str, ...] = tuple(TORCH_NAMES),
        decode_chunk: int = 1024,
    ):
        super().__init__()
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} outside world of {world_size}")
        self.data, self.batch_size, self.seed = data, batch_size, seed
        self.shuffle = shuffle_window > 1
        self.window = shuffle_window if self.shuffle else 4096  # unshuffled: windows are only bookmarks
        self.rank, self.world_size = rank, world_size
        self.start = start or Position()
        self.epochs, self.verify, self.names = epochs, verify, names
        self.decode_chunk = decode_chunk
        """Records parsed per call (several batches at once)."""

    def _epoch_records(self, order: list[int], fi: int, offset: int) -> Iterator[tuple[bytes, int, int]]:
        """(record, file index, byte offset) of the records of one epoch from (fi, offset); the position
        returned with a record is that of the record after it."""
        for k in range(fi, len(order)):
            for data, nxt in iter_records(self.data.files[order[k]], offset if k == fi else 0, self.verify):
                yield data, k, nxt

    def _windows(self, start: Position) -> Iterator[tuple[tuple[int, int, int, int, int], list[bytes]]]:
        """((epoch, window, file, offset, record) bookmark, records) of each shuffle window from `start`."""
        files = self.data.files
        epoch, window, fi, offset, record = start.epoch, start.window, start.file, start.offset, start.record
        while self.epochs is None or epoch < self.epochs:
            order = file_order(len(files), self.seed, epoch, self.shuffle)
            bookmark, records, epoch_start = (epoch, window, fi, offset, record), [], record
            for data, k, nxt in self._epoch_records(order, fi, offset):
                records.append(data)
                if len(records) == self.window:
                    yield bookmark, records
                    record, window = record + len(records), window + 1
                    bookmark, records = (epoch, window, k, nxt, record), []
            if records:
                yield bookmark, records
                record += len(records)
            if record == epoch_start and fi == 0 and offset == 0:
                raise UserError(f"the instance files hold no records ({files[0]} ...)")
            epoch, window, fi, offset = epoch + 1, 0, 0, 0

    def batches(self, worker: int = 0, num_workers: int = 1) -> Iterator[tuple[dict, Position]]:
        """The batches of this rank that loader worker `worker` of `num_workers` produces."""
        b, world, rank = self.batch_size, self.world_size, self.rank
        first = self.start.next_batch
        s = self.start
        element = s.element
        pending: list[bytes] = []  # records of the batch being filled
        pending_index, pending_mark = -1, None
        done: list[tuple[list[bytes], Position]] = []  # complete batches, decoded together
        for (epoch, window, fi, offset, record), records in self._windows(s):
            mark = Position(epoch, window, fi, offset, record, element, 0)
            perm = window_order(len(records), self.seed, epoch, window, self.shuffle)
            own = np.arange((rank - record) % world, len(records), world)  # g % world == rank
            for p in own.tolist():
                i = element // b
                if i >= first and (i - first) % num_workers == worker:
                    if not pending:
                        pending_index, pending_mark = i, mark
                    pending.append(records[perm[p]])
                    if len(pending) == b:
                        done.append((pending, dataclasses.replace(pending_mark, next_batch=i + 1)))
                        pending = []
                        if len(done) * b >= self.decode_chunk:
                            yield from self._decode(done)
                            done = []
                element += 1
            if done:  # do not hold decoded-ready batches across a window read
                yield from self._decode(done)
                done = []
        if pending:  # a finite stream's last, short batch
            done.append((pending, dataclasses.replace(pending_mark, next_batch=pending_index + 1)))
        yield from self._decode(done)

    def _decode(self, batches: list[tuple[list[bytes], Position]]) -> Iterator[tuple[dict, Position]]:
        """Parse several batches in one call (numpy's per-call overhead amortised), then split them."""
        if not batches:
            return
        try:
            arrays = parse_examples([r for recs, _ in batches for r in recs], self.data.lengths, self.names)
        except RecordError as err:
            raise RecordError(f"{self.data.source}: {err} (not an ALBERT pretraining instance)") from None
        start = 0
        for recs, position in batches:
            part = {k: v[start : start + len(recs)] for k, v in arrays.items()}
            start += len(recs)
            yield to_torch(part), position

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        if info is None:
            return self.batches()
        return self._in_worker(info.id, info.num_workers)

    def _in_worker(self, worker: int, num_workers: int):
        """The batches of a loader worker process. A UserError (a damaged file) travels as an item: the
        DataLoader would re-raise it in the training process wrapped in the worker's traceback text;
        make_loader's loader raises it there as itself, one line."""
        try:
            yield from self.batches(worker, num_workers)
        except UserError as err:
            yield err


class _Loader(torch.utils.data.DataLoader):
    """A DataLoader that raises the UserError a worker passed on (see InstanceStream._in_worker)."""

    def __iter__(self):
        for item in super().__iter__():
            if isinstance(item, UserError):
                raise item
            yield item


def make_loader(stream: InstanceStream, num_workers: int = 0, pin_memory: bool = False, prefetch: int = 4):
    """A DataLoader over a stream of ready batches (each worker a separate process)."""
    kwargs = {}
    if num_workers > 0:
        kwargs = dict(prefetch_factor=prefetch, persistent_workers=False, multiprocessing_context="fork")
    # Its own generator: creating the loader's iterator must not draw from the global torch RNG
    # (that would shift dropout masks of a resumed run against an uninterrupted one).
    return _Loader(
        stream,
        batch_size=None,
        num_workers=num_workers,
        pin_memory=pin_memory,
        generator=torch.Generator().manual_seed(0),
        **kwargs,
    )

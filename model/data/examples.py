"""tf.train.Example parsing: serialised pretraining instances (original ALBERT schema) -> numpy arrays
and torch tensors, without TensorFlow.

A `tf.train.Example` with fixed-length int64/float features is parsed in two steps: a small
Python scan per record finds where each feature's packed payload lies (8 map entries, a few dozen
byte reads), then each feature is decoded for the whole batch at once with numpy (one vectorised
varint decode over the concatenated payloads). Records written by TensorFlow's protobuf (the original
generator: any map order, packed lists) and by pipelines.tfexample (schema order) parse the same;
unpacked lists and unknown fields fall back to a general scanner. TensorFlow is never imported.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch

from core.errors import UserError
from core.schema import FEATURES

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


class RecordError(UserError, ValueError):
    """A damaged TFRecord file, or a record that is not a tf.train.Example of the expected schema. A
    UserError: the command prints it as one line naming the file (the data is bad, not the code)."""


def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    byte = buf[pos]
    if byte < 0x80:
        return byte, pos + 1
    result, shift = byte & 0x7F, 7
    pos += 1
    while True:
        byte = buf[pos]
        result |= (byte & 0x7F) << shift
        pos += 1
        if byte < 0x80:
            return result, pos
        shift += 7


def _skip_field(buf: bytes, pos: int, wire: int) -> int:
    if wire == 0:
        return _uvarint(buf, pos)[1]
    if wire == 1:
        return pos + 8
    if wire == 2:
        length, pos = _uvarint(buf, pos)
        return pos + length
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
            length, pos = _uvarint(buf, pos)
            yield field, wire, pos, pos + length
            pos += length
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
        length, pos = _uvarint(buf, 1)
        end = pos + length
        if end != len(buf):
            return _scan_general(buf)
        out = {}
        uvarint = _uvarint
        while pos < end:
            if buf[pos] != 0x0A:  # Features.feature (1, LEN)
                return _scan_general(buf)
            length = buf[pos + 1]
            if length < 0x80:
                pos += 2
            else:
                length, pos = uvarint(buf, pos + 1)
            entry_end = pos + length
            if buf[pos] != 0x0A:  # entry.key first
                return _scan_general(buf)
            length = buf[pos + 1]  # names are short
            name = buf[pos + 2 : pos + 2 + length]
            pos += 2 + length
            if length >= 0x80 or buf[pos] != 0x12:  # entry.value
                return _scan_general(buf)
            length = buf[pos + 1]
            pos = pos + 2 if length < 0x80 else uvarint(buf, pos + 1)[1]
            kind = buf[pos] >> 3  # Feature oneof field number
            length = buf[pos + 1]
            if length < 0x80:
                pos += 2
            else:
                length, pos = uvarint(buf, pos + 1)
            list_end = pos + length
            if pos < list_end:
                if buf[pos] != 0x0A:  # packed .value
                    return _scan_general(buf)
                length = buf[pos + 1]
                pos = pos + 2 if length < 0x80 else uvarint(buf, pos + 1)[1]
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

    `lengths` gives the fixed length of each wanted feature (core.schema.feature_lengths); only
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

"""TFRecord files read from a byte offset, in large chunks, with the offset of each next record (what
a stream's saved position points at). The framing and its masked CRC32C are core.tfrecord's;
this reader adds streaming and errors that name the file and byte."""

from __future__ import annotations

import struct

from core import storage
from core.tfrecord import masked_crc
from model.data.examples import RecordError

_HEADER = struct.Struct("<QI")  # length, masked CRC32C of the length
_FOOTER = struct.Struct("<I")  # masked CRC32C of the data
_DAMAGED = " (the file is damaged, e.g. a copy cut short: rebuild or copy it again)"


def iter_records(path: str, offset: int = 0, verify: bool = True, chunk: int = 1 << 22):
    """(record bytes, byte offset of the NEXT record) for each record of a TFRecord file from `offset`.

    Reads in large chunks (few system calls); the length CRC is always checked, the data CRC when
    `verify` (a corrupt file is an error naming the file and byte offset, never a silent skip)."""
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
            if masked_crc(buf[pos : pos + 8]) != length_crc:
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
            if verify and masked_crc(data) != footer(buf, end)[0]:
                raise RecordError(f"{path}: corrupt record data at byte {base + pos}{_DAMAGED}")
            pos = end + 4
            yield data, base + pos

"""TFRecord framing: each record is its length (uint64, little-endian), the length's masked CRC32C,
the data, and the data's masked CRC32C. The writer (instances) and the readers (the trainer's data
stream, tests, tools) share this one implementation."""

from __future__ import annotations

import struct

import google_crc32c


def masked_crc(data: bytes) -> int:
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame_record(data: bytes) -> bytes:
    """One TFRecord: length, its masked CRC32C, the data, its masked CRC32C."""
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked_crc(length)) + data + struct.pack("<I", masked_crc(data))


def read_records(blob: bytes, verify: bool = True):
    """Iterate the records of a TFRecord file's bytes (a small reader for tests and tools)."""
    pos = 0
    while pos < len(blob):
        (length,) = struct.unpack_from("<Q", blob, pos)
        if verify and struct.unpack_from("<I", blob, pos + 8)[0] != masked_crc(blob[pos : pos + 8]):
            raise ValueError(f"corrupt TFRecord length at byte {pos}")
        data = blob[pos + 12 : pos + 12 + length]
        if verify and struct.unpack_from("<I", blob, pos + 12 + length)[0] != masked_crc(data):
            raise ValueError(f"corrupt TFRecord data at byte {pos}")
        yield data
        pos += 16 + length

"""TFRecord framing (core.tfrecord): records round-trip and corruption is detected."""

from __future__ import annotations

import pytest

from core.tfrecord import frame_record, read_records


def test_records_round_trip_and_detect_corruption():
    blob = b"".join(frame_record(x) for x in (b"abc", b"", b"x" * 1000))
    assert list(read_records(blob)) == [b"abc", b"", b"x" * 1000]
    broken = bytearray(blob)
    broken[14] ^= 0xFF
    with pytest.raises(ValueError):
        list(read_records(bytes(broken)))

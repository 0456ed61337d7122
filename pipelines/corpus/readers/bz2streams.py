"""bz2 data read stream by stream, so that a damaged stream costs itself and not the rest of the file.

A bz2 file is one or more streams back to back. Every stream starts on a byte boundary with `BZh`,
the block-size digit 1-9 and the magic of its first block, 0x314159265359 (`1AY&SY`; an empty stream
has the end-of-stream magic 0x177245385090 instead): 10 fixed bytes that compressed data does not
hold by chance. A multistream zhwiki dump is a header stream, one stream per 100 pages and a footer
stream, and its index gives each page stream's offset.

`iter_bz2` decompresses one stream after the other. When one is damaged (bad data or a CRC that does
not match: OSError; the data ends inside it: EOFError), it reports the damage and goes on at the
next stream: the next offset the caller knows (the index's), or, without, the next stream header
found by scanning the compressed bytes. Events, in order:

    ("start", offset)         a stream begins at compressed byte `offset`
    ("data", bytes, fed)      decompressed bytes of it; `fed`: the compressed offset read up to
    ("end", offset)           it ended cleanly, every CRC checked; the next one begins at `offset`
    ("damage", Damage)        it is damaged; reading goes on at Damage.resume (None: nothing more)

Nothing a damaged stream handed out can be trusted: bz2 checks a block's CRC at the end of the
block, after handing out its bytes, and flipped bytes make it hand out garbage first in about 4
cases of 10. The caller holds what it makes of a stream until "end" (readers/wiki.py).

Inside one stream there is no byte-aligned mark to resume at (blocks start at any bit), so a damaged
single-stream file loses everything after the damage.
"""

from __future__ import annotations

import bz2
import re
from collections.abc import Iterator
from typing import NamedTuple

STREAM_HEAD = re.compile(rb"BZh[1-9](?:1AY&SY|\x17rE8P\x90)")
READ = 1 << 16  # compressed bytes per read: a damage is located to within this
OUT = 1 << 20  # decompressed bytes per step, at most
SCAN = 1 << 20

# A block holds at most 900,000 bytes after bzip2's first run-length step, which turns 4 to 255
# equal bytes into 5: a block decompresses to at most 900,000 / 5 * 255 bytes. Output that lies
# more than that (plus one step) behind the newest comes from blocks whose CRC was checked.
BLOCK_OUTPUT_MAX = 900_000 // 5 * 255 + OUT


class Damage(NamedTuple):
    start: int  # compressed offset of the damaged stream
    failed_at: int  # compressed offset read up to when it failed
    resume: int | None  # where reading goes on: the next stream, or None (nothing more)
    truncated: bool  # the file ends inside the stream (its rest is not in the file)
    detail: str


def next_stream(f, after: int, end: int | None) -> int | None:
    """Offset of the first stream header after byte `after` (and before `end`), or None."""
    pos, tail = after + 1, b""
    f.seek(pos)
    while end is None or pos < end:
        data = f.read(SCAN if end is None else min(SCAN, end - pos))
        if not data:
            return None
        window = tail + data
        m = STREAM_HEAD.search(window)
        if m:
            found = pos - len(tail) + m.start()
            return found if end is None or found < end else None
        tail, pos = window[-9:], pos + len(data)
    return None


def iter_bz2(f, start: int, end: int | None, stops: list[int] = ()) -> Iterator[tuple]:
    """Events (module docstring) of the bz2 streams in bytes [start, end) of the seekable binary file
    `f` (end None: to the end of the file). `stops`: the offsets where streams are known to begin
    (the index's); after a damage, reading resumes at the next of them, or, after the last, at the
    next stream header."""
    stops = sorted(stops)
    state = {"fed": start}

    def read() -> bytes:
        want = READ if end is None else min(READ, end - state["fed"])
        if want <= 0:
            return b""
        data = f.read(want)
        state["fed"] += len(data)
        return data

    f.seek(start)
    pos, carry = start, b""
    while True:
        data = carry or read()
        if not data:
            return
        yield ("start", pos)
        dec = bz2.BZ2Decompressor()
        try:
            while True:
                out = dec.decompress(data, OUT)
                if out:
                    yield ("data", out, state["fed"])
                if dec.eof:
                    break
                if dec.needs_input:
                    data = read()
                    if not data:
                        raise EOFError("the data ends inside the stream")
                else:
                    data = b""
        except (OSError, EOFError) as err:
            f.seek(0, 2)  # the file's end: whether the data ran out there (a cut file)
            truncated = isinstance(err, EOFError) and state["fed"] >= f.tell()
            resume = next((s for s in stops if s > pos), None)
            if resume is None:  # no known stream after it: look for one
                resume = next_stream(f, pos, end)
            yield ("damage", Damage(pos, state["fed"], resume, truncated, f"{type(err).__name__}: {err}"))
            if resume is None:
                return
            f.seek(resume)
            pos, carry, state["fed"] = resume, b"", resume
            continue
        carry = dec.unused_data
        pos = state["fed"] - len(carry)
        yield ("end", pos)

"""text: one sentence per line, a blank line between documents -> one raw record per document."""

from __future__ import annotations

from collections.abc import Iterator

from pipelines.corpus.options import CorpusOptions
from pipelines.corpus.readers.error_records import STREAM_ERRORS, error_record, rest_lost
from pipelines.corpus.readers.ranges import bounded_lines, open_decompressed
from pipelines.documents import content_id


def read_text(item: dict, opts: CorpusOptions) -> Iterator[dict]:
    """One sentence per line, a blank line between documents. A document with an undecodable line
    or over `max_record_bytes` is one dead letter; ids hash the content (no native id)."""
    lines: list[str] = []
    size, bad, first_line, lineno, records, done = 0, None, 0, 0, 0, 0
    stream = None

    def flush():
        where = f"{item['path']}:{first_line}"
        if bad is not None:
            return error_record(item, where, bad[0], bad[1], bad[2])
        text = "\n".join(lines)
        return {
            "source": "text",
            "id": content_id("text", text),
            "title": "",
            "url": "",
            "text": text,
            "markup": "plain",
            "where": where,
        }

    try:
        stream = open_decompressed(item)
        with stream:
            for _, raw in bounded_lines(stream, 0, None, opts.reading.max_record_bytes):
                lineno += 1
                if raw is not None and not raw.strip():
                    if lines or bad:
                        # bytes of the file behind the documents read: the rate a loss is estimated at
                        records, done = records + 1, stream.done()
                        yield flush()
                    lines, size, bad = [], 0, None
                    continue
                if not lines and bad is None:
                    first_line = lineno
                if bad is not None:
                    continue
                size += len(raw) if raw is not None else opts.reading.max_record_bytes + 1
                if raw is None or size > opts.reading.max_record_bytes:
                    bad, lines = (
                        ("record_too_large", f"document over {opts.reading.max_record_bytes} bytes", b""),
                        [],
                    )
                    continue
                try:
                    lines.append(raw.decode("utf-8").rstrip("\r\n"))
                except UnicodeDecodeError as err:
                    bad, lines = ("invalid_utf8", f"line {lineno}: {err}", raw), []
            if lines or bad:
                yield flush()
    except STREAM_ERRORS as err:
        # a damaged .gz/.bz2 cannot be resumed: the rest of the file (the document being read
        # included) is lost, counted by its bytes
        yield rest_lost(item, f"{item['path']}:{lineno}", err, records, done, item.get("size") or done)

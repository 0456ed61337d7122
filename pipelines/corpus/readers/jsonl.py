"""wiki2019zh and news2016zh (brightmart/nlp_chinese_corpus): JSON lines -> one raw record per line,
read by byte ranges when the file is not compressed."""

from __future__ import annotations

import json
from collections.abc import Iterator

from core import storage
from pipelines.corpus.options import CorpusOptions
from pipelines.corpus.readers.error_records import STREAM_ERRORS, error_record, rest_lost
from pipelines.corpus.readers.ids import native_id
from pipelines.corpus.readers.ranges import bounded_lines, compression, open_decompressed
from pipelines.documents import content_id


def _json_record(item: dict, obj: dict) -> dict:
    """Map one brightmart/nlp_chinese_corpus object to a raw record (KeyError: a field is missing).
    Ids: readers/ids.py."""
    kind = item["kind"]
    if kind == "wiki2019zh":
        title, text = obj.get("title") or "", obj["text"]
        first, _, rest = text.partition("\n")
        if first.strip() == title.strip():  # wiki2019zh repeats the title as the first line
            text = rest
        native, url = obj.get("id"), obj.get("url") or ""
    else:  # news2016zh
        title, text, native, url = obj.get("title") or "", obj["content"], obj.get("news_id"), ""
    if not isinstance(text, str):
        raise KeyError("text is not a string")
    doc_id = native_id(item, native) if native not in (None, "") else content_id(kind, text)
    return {
        "source": kind,
        "id": doc_id,
        "title": str(title),
        "url": str(url),
        "text": text,
        "markup": "plain",
    }


def read_jsonl(item: dict, opts: CorpusOptions) -> Iterator[dict]:
    compressed = compression(item["path"]) is not None
    stream, records, done, pos = None, 0, 0, item.get("start", 0)
    try:
        if compressed:
            stream = open_decompressed(item)
            start, end = 0, None
        else:
            stream = storage.open_input(item["path"], item.get("identity"))
            start, end = item.get("start", 0), item.get("end")
            stream.seek(start)
        with stream:
            for at, line in bounded_lines(stream, start, end, opts.reading.max_record_bytes):
                pos = at
                record = _line_record(item, f"{item['path']}:{at}", line, opts)
                if record is not None:
                    # bytes of the file behind the records read: the rate a loss is estimated at
                    records, done = (
                        records + 1,
                        stream.done() if compressed else at + len(line or b"") - start,
                    )
                    yield record
    except STREAM_ERRORS as err:
        # a damaged .gz/.bz2 cannot be resumed: the rest of the file is lost, counted by its bytes
        end = item["size"] if compressed else item.get("end") or item["size"]
        yield rest_lost(item, f"{item['path']}:{pos}", err, records, done, end)


def _line_record(item: dict, where: str, line: bytes | None, opts: CorpusOptions) -> dict | None:
    """One JSON line -> its raw record, the error record of a line that cannot be used, or None for
    a blank line."""
    if line is None:
        return error_record(
            item, where, "record_too_large", f"line over {opts.reading.max_record_bytes} bytes"
        )
    if not line.strip():
        return None
    try:
        obj = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError as err:
        return error_record(item, where, "invalid_utf8", str(err), line)
    except ValueError as err:
        return error_record(item, where, "malformed_json", str(err), line)
    try:
        if not isinstance(obj, dict):
            raise KeyError("not a JSON object")
        record = _json_record(item, obj)
    except KeyError as err:
        return error_record(item, where, "missing_field", f"missing or invalid field {err}", line)
    record["where"] = where
    return record

"""wiki2019zh and news2016zh (brightmart/nlp_chinese_corpus): JSON lines -> one raw record per line,
read by byte ranges when the file is not compressed."""

from __future__ import annotations

import json
from collections.abc import Iterator

from pipelines.core import storage
from pipelines.corpus.options import CorpusOptions
from pipelines.corpus.readers.errors import STREAM_ERRORS, error_record, stream_error
from pipelines.corpus.readers.ranges import bounded_lines, compression, open_decompressed
from pipelines.documents import content_id


def _json_record(kind: str, obj: dict) -> dict:
    """Map one brightmart/nlp_chinese_corpus object to a raw record (KeyError: a field is missing)."""
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
    doc_id = f"{kind}:{native}" if native not in (None, "") else content_id(kind, text)
    return {
        "source": kind,
        "id": doc_id,
        "title": str(title),
        "url": str(url),
        "text": text,
        "markup": "plain",
    }


def read_jsonl(item: dict, opts: CorpusOptions) -> Iterator[dict]:
    kind = item["kind"]
    compressed = compression(item["path"]) is not None
    try:
        if compressed:
            stream = open_decompressed(item)
            start, end = 0, None
        else:
            stream = storage.open_read(item["path"])
            start, end = item.get("start", 0), item.get("end")
            stream.seek(start)
        with stream:
            for at, line in bounded_lines(stream, start, end, opts.max_record_bytes):
                where = f"{item['path']}:{at}"
                if line is None:
                    yield error_record(
                        item, where, "record_too_large", f"line over {opts.max_record_bytes} bytes"
                    )
                    continue
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line.decode("utf-8"))
                except UnicodeDecodeError as err:
                    yield error_record(item, where, "invalid_utf8", str(err), line)
                    continue
                except ValueError as err:
                    yield error_record(item, where, "malformed_json", str(err), line)
                    continue
                try:
                    if not isinstance(obj, dict):
                        raise KeyError("not a JSON object")
                    record = _json_record(kind, obj)
                except KeyError as err:
                    yield error_record(item, where, "missing_field", f"missing or invalid field {err}", line)
                    continue
                record["where"] = where
                yield record
    except STREAM_ERRORS as err:
        yield error_record(item, item["path"], stream_error(err), f"{type(err).__name__}: {err}")

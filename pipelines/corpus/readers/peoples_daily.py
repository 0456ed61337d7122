"""peoples-daily: the People's Daily 1998 corpus (the bundled sample, or a file of it) -> one raw
record per article."""

from __future__ import annotations

from collections.abc import Iterator

from pipelines.corpus.readers.errors import error_record
from pipelines.documents import UnreadableFile


def read_peoples_daily(item: dict) -> Iterator[dict]:
    from pipelines.peoples_daily import read_articles

    path = item["path"] or None
    try:
        for doc in read_articles(path):
            yield _peoples_daily_record(doc)
    except UnreadableFile as err:
        yield error_record(item, path or "", "corrupt_input", str(err))


def _peoples_daily_record(doc: dict) -> dict:
    return {
        "source": "peoples-daily",
        "id": doc["id"],
        "title": doc["title"],
        "url": "",
        "text": "\n".join(doc["sentences"]),
        "markup": "plain",
        "where": doc["id"],
    }

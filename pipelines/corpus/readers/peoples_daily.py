"""peoples-daily: the People's Daily 1998 corpus (the bundled sample, or a file of it) -> one raw
record per article."""

from __future__ import annotations

from collections.abc import Iterator

from pipelines.corpus.readers.error_records import error_record
from pipelines.corpus.readers.ids import native_id
from pipelines.documents import UnreadableFile


def read_peoples_daily(item: dict) -> Iterator[dict]:
    from pipelines.peoples_daily import read_articles

    path = item["path"] or None
    try:
        for doc in read_articles(path):
            yield _peoples_daily_record(item, doc)
    except UnreadableFile as err:
        yield error_record(item, path or "", "corrupt_input", str(err))


def _peoples_daily_record(item: dict, doc: dict) -> dict:
    """An article -> its raw record; its id (readers/ids.py) keeps the article number of
    pipelines.peoples_daily (`199801-NNNNN`, in file order) after the file's name."""
    return {
        "source": "peoples-daily",
        "id": native_id(item, doc["id"].split(":", 1)[1]),
        "title": doc["title"],
        "url": "",
        "text": "\n".join(doc["sentences"]),
        "markup": "plain",
        "where": doc["id"],
    }

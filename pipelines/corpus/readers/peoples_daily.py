"""peoples-daily: the People's Daily 1998 corpus (the bundled sample, or a file of it) -> one raw
record per article. An article of the NER task's dev or test split (core.peoples_daily.ner_split, by
its article id) is marked `held_out` (its split), and clean_record drops it as `held_out_eval`."""

from __future__ import annotations

from collections.abc import Iterator

from core.peoples_daily import HELD_OUT_SPLITS, ner_split
from pipelines.corpus.readers.error_records import error_record
from pipelines.corpus.readers.ids import native_id
from pipelines.documents import UnreadableFile


def read_peoples_daily(item: dict, hold_out_ner_eval: bool = True) -> Iterator[dict]:
    """The records of the file of `item`; with `hold_out_ner_eval` (the corpus option), those of the
    NER task's dev and test articles marked `held_out`."""
    from pipelines.peoples_daily import read_articles

    path = item["path"] or None
    try:
        for doc in read_articles(path):
            record = _peoples_daily_record(item, doc)
            split = ner_split(doc["id"])
            if hold_out_ner_eval and split in HELD_OUT_SPLITS:
                record["held_out"] = split
            yield record
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

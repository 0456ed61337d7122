"""File access for readers and writers that run on any Beam worker.

Beam's FileSystems serve local paths, gs:// (apache-beam[gcp]), hdfs:// and s3:// (with their extras)
the same way on a laptop and on Dataflow workers; any other fsspec URL (memory://, ...) falls back to
fsspec. Files are opened UNCOMPRESSED: readers decompress themselves, so they can seek to the byte
ranges of a bz2 multistream dump.
"""

from __future__ import annotations

import os
import posixpath
from typing import BinaryIO

import fsspec
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems


def _beam_handles(path: str) -> bool:
    try:
        FileSystems.get_filesystem(path)
        return True
    except ValueError:
        return False


def has_glob(path: str) -> bool:
    return any(c in path for c in "*?[")


def match(pattern: str) -> list[tuple[str, int]]:
    """[(path, size in bytes)] of the files matching a path or glob, sorted by path."""
    if _beam_handles(pattern):
        found = [(m.path, m.size_in_bytes) for r in FileSystems.match([pattern]) for m in r.metadata_list]
    else:
        fs, _, paths = fsspec.get_fs_token_paths(pattern)
        found = [(fs.unstrip_protocol(p), fs.size(p)) for p in paths if fs.isfile(p)]
    return sorted(set(found))


def exists(path: str) -> bool:
    if _beam_handles(path):
        return FileSystems.exists(path)
    fs, _, (p,) = fsspec.get_fs_token_paths(path)
    return fs.exists(p)


def size(path: str) -> int:
    found = match(path)
    if not found:
        raise FileNotFoundError(path)
    return found[0][1]


def open_read(path: str) -> BinaryIO:
    """A seekable binary reader of the raw bytes."""
    if _beam_handles(path):
        return FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)
    return fsspec.open(path, "rb").open()


def open_write(path: str) -> BinaryIO:
    """A binary writer (parent folders are created where the filesystem has folders)."""
    if _beam_handles(path):
        if "://" not in path:  # local: Beam's LocalFileSystem.create makes no parent folders
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        return FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED)
    return fsspec.open(path, "wb", auto_mkdir=True).open()


def rename(src: str, dst: str) -> None:
    if _beam_handles(src):
        if FileSystems.exists(dst):
            FileSystems.delete([dst])
        FileSystems.rename([src], [dst])
    else:
        fs, _, (s,) = fsspec.get_fs_token_paths(src)
        fs.mv(s, fsspec.core.strip_protocol(dst))


def delete(paths: list[str]) -> None:
    paths = [p for p in paths if exists(p)]
    if not paths:
        return
    if _beam_handles(paths[0]):
        FileSystems.delete(paths)
    else:
        fs, _, _ = fsspec.get_fs_token_paths(paths[0])
        fs.rm([fsspec.core.strip_protocol(p) for p in paths], recursive=True)


def join(base: str, *parts: str) -> str:
    if _beam_handles(base):
        return FileSystems.join(base, *parts)
    return posixpath.join(base, *parts)


def basename(path: str) -> str:
    return posixpath.basename(path.rstrip("/"))


def dirname(path: str) -> str:
    return FileSystems.split(path)[0] if _beam_handles(path) else posixpath.dirname(path)

"""Inputs read exactly as they were hashed.

A stage hashes its inputs for its manifest (and a flow for the stage's key) before it reads them,
often minutes before, on another machine. An input overwritten in between used to give documents of
the new content under the old hash; one deleted, or one whose download kept failing, used to become
a dead letter or two, and the stage published what it had. Here:

    entry = fingerprint(path)           # {"size", "sha256" | "checksum", "identity"}: one version
    with open_input(path, entry["identity"]) as f:
        ...                             # that version's bytes, or StorageFailed

`identity` names the version that was hashed: on GCS the object's generation (from the same
metadata as its checksum), read by generation (GCS answers 404 once it is not the current one);
locally size, mtime and inode, checked when the file is opened and again when it is closed (after
reading); on other stores the size (nothing there names a version). Any read of the raw bytes that
fails (after the request policy's retries, core/storage/policy.py), and any version that is no
longer there, raises core.errors.StorageFailed naming the input. It is never an OSError: the
readers take a decompressor's OSError for damaged content, which a failed transfer is not.
"""

from __future__ import annotations

import io
import os
from typing import IO, Any

from core.errors import InputChanged, StorageFailed
from core.storage.files import CHUNK, checksum, sha256
from core.storage.paths import filesystem, is_url, local_path, protocol

RERUN = "rerun the same command: it hashes its inputs again"


def _local_identity(st: os.stat_result) -> dict[str, int]:
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "inode": st.st_ino}


def identity(path: str) -> dict[str, Any]:
    """What names the version of `path` there is now (module docstring)."""
    if not is_url(path):
        return _local_identity(os.stat(local_path(path)))
    fs, p = filesystem(path)
    info = fs.info(p)
    out: dict[str, Any] = {"size": int(info["size"])}
    if protocol(path) in ("gs", "gcs") and info.get("generation"):
        out["generation"] = str(info["generation"])
    return out


def fingerprint(path: str) -> dict[str, Any]:
    """{"size", "sha256" (local) or "checksum" (the store's, read from its metadata), "identity"}
    of one version of `path`. A local file that changes while it is hashed is refused."""
    if is_url(path):
        fs, p = filesystem(path)
        info = fs.info(p)  # one answer: the checksum and the generation belong together
        entry: dict[str, Any] = {"size": int(info["size"]), "checksum": checksum(path, info)}
        ident: dict[str, Any] = {"size": entry["size"]}
        if protocol(path) in ("gs", "gcs") and info.get("generation"):
            ident["generation"] = str(info["generation"])
        entry["identity"] = ident
        return entry
    before = identity(path)
    digest = sha256(path)
    if identity(path) != before:
        raise InputChanged("hashing", path, "it changed while it was hashed", RERUN)
    return {"size": before["size"], "sha256": digest, "identity": before}


def _failure(path: str, expected: dict | None, err: BaseException) -> StorageFailed:
    """The one failure for `err`, met reading `path` (pinned to `expected`, if given)."""
    if isinstance(err, StorageFailed):
        return err.at(path, "reading")
    if isinstance(err, FileNotFoundError):
        if expected is not None:  # gone, or (a bucket) its generation is no longer the current one
            return _changed(path, expected, None)
        return StorageFailed("reading", path, "no such file or object")
    text = err.strerror if isinstance(err, OSError) and err.strerror else str(err).split("\n")[0]
    return StorageFailed("reading", path, text or type(err).__name__)


def _changed(path: str, expected: dict, now: dict | None) -> StorageFailed:
    if now is None:
        generation = expected.get("generation")
        gone = f" (generation {generation} is no longer there)" if generation else ""
        what = f"deleted or replaced after it was hashed{gone}"
    else:
        keys = ("size", "mtime_ns", "inode")
        differ = ", ".join(
            f"{k} {expected.get(k)} -> {now.get(k)}" for k in keys if expected.get(k) != now.get(k)
        )
        what = f"changed after it was hashed ({differ})"
    return InputChanged("reading", path, what, RERUN)


class _Input(io.RawIOBase):
    """The raw bytes of one input: its read errors become StorageFailed naming it, and (local files)
    its identity is checked at open and at close."""

    def __init__(self, path: str, raw: IO[bytes], expected: dict | None, local: bool):
        self.path, self.raw, self.expected, self.local = path, raw, expected, local
        if local and expected is not None:
            self._check(_local_identity(os.fstat(raw.fileno())))

    def _check(self, now: dict | None) -> None:
        keys = ("size", "mtime_ns", "inode")
        if now is None or any(self.expected.get(k) != now.get(k) for k in keys):
            raise _changed(self.path, self.expected, now)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        try:
            data = self.raw.read(len(b))
        except (OSError, StorageFailed) as err:
            raise _failure(self.path, self.expected, err) from None
        b[: len(data)] = data
        return len(data)

    def seek(self, offset: int, whence: int = 0) -> int:
        try:
            return self.raw.seek(offset, whence)
        except (OSError, StorageFailed) as err:
            raise _failure(self.path, self.expected, err) from None

    def tell(self) -> int:
        return self.raw.tell()

    def close(self) -> None:
        if self.closed:
            return
        try:
            if self.local and self.expected is not None:
                fd_now = _local_identity(os.fstat(self.raw.fileno()))
                try:
                    path_now = _local_identity(os.stat(local_path(self.path)))
                except FileNotFoundError:
                    path_now = None
                self._check(fd_now)  # changed in place while it was read
                self._check(path_now)  # replaced or deleted while it was read
        finally:
            self.raw.close()
            super().close()


def open_input(path: str, expected: dict | None = None) -> IO[bytes]:
    """A seekable binary reader of the raw bytes of the version of `path` that `expected` (an
    identity) names; without one, of whatever is there, its read errors named all the same."""
    local = not is_url(path)
    try:
        if local:
            raw: IO[bytes] = open(local_path(path), "rb")
        else:
            generation = (expected or {}).get("generation")
            fs, p = filesystem(path, version_aware=bool(generation))
            raw = fs.open(f"{p}#{generation}" if generation else p, "rb", block_size=CHUNK)
    except (OSError, StorageFailed) as err:
        raise _failure(path, expected, err) from None
    return io.BufferedReader(_Input(path, raw, expected, local), buffer_size=CHUNK)

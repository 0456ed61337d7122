"""Where the registry keeps its objects: a local folder, gs://bucket/prefix or any other fsspec URL,
each with a compare-and-swap write, so that concurrent promoters never overwrite each other.

A store reads and writes whole small objects under one root:
    read(path)                  -> (bytes or None, token)   token identifies the version read
    write_if(path, data, token) -> bool                     False when the object is no longer that version
    append_line(path, line)                                 one log line, never lost to a concurrent append
    sha256(path) -> str | None                              None when the object does not exist
token None means "the object does not exist" (write_if then creates it exclusively). Locally the
compare-and-swap is a `flock` around read-compare-write-temp-`os.replace`; on GCS an upload with
`if_generation_match=<generation read>` (the server refuses it when anyone wrote in between), and on
other URLs a read-compare-write under a lock of this process: core.storage.cas, which the
folder locks of core.lock use too.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import uuid
from collections.abc import Iterator
from typing import Any

from core import storage
from core.storage.cas import FsspecObjects, GCSObjects

_log = logging.getLogger(__name__)


class PromotionConflict(Exception):
    """The pointer changed between the read that a promotion was based on and its write."""


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class _Hasher:
    """A write-only file object that hashes what is written to it (a download streamed into a sha256)."""

    def __init__(self):
        self.sha = hashlib.sha256()

    def write(self, data: bytes) -> int:
        self.sha.update(data)
        return len(data)


def _appended(data: bytes | None, line: str) -> bytes:
    """`data` with `line` appended; a torn last line (no newline: a writer died) stays a line of its
    own instead of swallowing the new entry."""
    data = data or b""
    if data and not data.endswith(b"\n"):
        data += b"\n"
    return data + (line.rstrip("\n") + "\n").encode("utf-8")


class LocalStore:
    """A local folder. CAS = an exclusive flock on `<root>/.lock`, then read-compare, write a temporary
    file in the same folder, fsync, os.replace (atomic on POSIX). flock is released by the kernel when a
    process dies, so a crashed promoter never leaves the registry locked."""

    def __init__(self, root: str):
        self.root = os.path.abspath(root)

    def url(self, path: str) -> str:
        return os.path.join(self.root, path)

    @contextlib.contextmanager
    def _locked(self, path: str) -> Iterator[None]:
        # One lock for the whole store: registry writes are few and tiny, and version folders stay clean.
        os.makedirs(os.path.dirname(self.url(path)), exist_ok=True)
        # Read-only is enough for flock: a teammate who cannot write .lock (another owner) still locks.
        fd = os.open(os.path.join(self.root, ".lock"), os.O_RDONLY | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    def _read(self, path: str) -> bytes | None:
        try:
            with open(self.url(path), "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def read(self, path: str) -> tuple[bytes | None, str | None]:
        data = self._read(path)
        return data, (None if data is None else _sha(data))

    def write_if(self, path: str, data: bytes, token: str | None) -> bool:
        full = self.url(path)
        with self._locked(path):
            current = self._read(path)
            if (None if current is None else _sha(current)) != token:
                return False
            tmp = os.path.join(os.path.dirname(full), f".{os.path.basename(full)}.{uuid.uuid4().hex[:8]}")
            try:
                with open(tmp, "xb") as f:  # mode from the umask: a shared registry stays readable
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, full)
            finally:
                if os.path.exists(tmp):
                    os.remove(tmp)
        return True

    def append_line(self, path: str, line: str) -> None:
        with self._locked(path), open(self.url(path), "a+b") as f:
            tail = b""
            if end := f.seek(0, os.SEEK_END):
                f.seek(end - 1)
                tail = f.read(1)
            f.write(_appended(tail, line)[len(tail) :])  # mode "a": writes always go to the end
            f.flush()
            os.fsync(f.fileno())

    def put_file(self, src: str, path: str) -> None:
        storage.copy(src, self.url(path))  # src: a path or URL; appears whole (temporary name, rename)

    def exists(self, path: str) -> bool:
        return storage.exists(self.url(path))

    def sha256(self, path: str) -> str | None:
        return storage.sha256(self.url(path)) if storage.isfile(self.url(path)) else None

    def list_dirs(self, path: str) -> list[str]:
        return storage.subdirs(self.url(path))


class GCSStore:
    """gs://bucket/prefix through the google-cloud-storage client. CAS uses object generations: every
    write of an object creates a new generation, and an upload with `if_generation_match=G` (0: the
    object must not exist) fails with 412 PreconditionFailed when the live generation is not G."""

    def __init__(self, url: str, client: Any = None):
        bucket, _, prefix = url.removeprefix("gs://").partition("/")
        self.objects = GCSObjects(client)  # read and write_if: generation preconditions
        self.client, self.bucket_name, self.prefix = self.objects.client, bucket, prefix.strip("/")
        self.bucket = self.client.bucket(bucket)

    def _name(self, path: str) -> str:
        return f"{self.prefix}/{path}" if self.prefix else path

    def url(self, path: str) -> str:
        return f"gs://{self.bucket_name}/{self._name(path)}"

    def read(self, path: str) -> tuple[bytes | None, int | None]:
        return self.objects.read(self.url(path))

    def write_if(self, path: str, data: bytes, token: int | None) -> bool:
        return self.objects.write_if(self.url(path), data, token) is not None

    def append_line(self, path: str, line: str, attempts: int = 50) -> None:
        # GCS objects are immutable: append = rewrite under a generation precondition, retried.
        for _ in range(attempts):
            data, token = self.read(path)
            if self.write_if(path, _appended(data, line), token):
                return
        raise PromotionConflict(f"could not append to {self.url(path)} after {attempts} attempts")

    def put_file(self, src: str, path: str) -> None:
        if src.startswith("gs://"):  # server-side copy, nothing through this machine
            storage.copy(src, self.url(path))
        else:
            with storage.local_file(src) as local:
                self.bucket.blob(self._name(path)).upload_from_filename(local)

    def exists(self, path: str) -> bool:
        return self.bucket.blob(self._name(path)).exists()

    def sha256(self, path: str) -> str | None:
        blob = self.bucket.get_blob(self._name(path))
        if blob is None:
            return None
        # Through this client (not gcsfs), streamed into the hash: a model file never sits in memory.
        h = _Hasher()
        blob.download_to_file(h, if_generation_match=blob.generation)
        return h.sha.hexdigest()

    def list_dirs(self, path: str) -> list[str]:
        prefix = self._name(path).rstrip("/") + "/"
        it = self.client.list_blobs(self.bucket_name, prefix=prefix, delimiter="/")
        for _ in it:  # the prefixes are filled in while the pages are consumed
            pass
        return sorted(p[len(prefix) :].rstrip("/") for p in it.prefixes)


class FsspecStore:
    """Any other fsspec URL (s3://, memory://, ...). The read-compare-write runs under a process-local
    lock only: safe for one promoter at a time (and for threads), NOT for concurrent promoters on
    different machines, because s3fs exposes no conditional write. Use a local or gs:// registry, or
    serialize promotions (one work-pool concurrency slot), where that matters."""

    objects = FsspecObjects()

    def __init__(self, url: str):
        self.fs, self.root = storage.filesystem(url)
        self.protocol = url.split("://", 1)[0]
        _log.warning("registry on %s:// has no compare-and-swap: run one promotion at a time", self.protocol)

    def _p(self, path: str) -> str:
        return f"{self.root.rstrip('/')}/{path}"

    def url(self, path: str) -> str:
        return f"{self.protocol}://{self._p(path).lstrip('/')}" if self.protocol != "file" else self._p(path)

    def read(self, path: str) -> tuple[bytes | None, str | None]:
        return self.objects.read(self.url(path))

    def write_if(self, path: str, data: bytes, token: str | None) -> bool:
        return self.objects.write_if(self.url(path), data, token) is not None

    def append_line(self, path: str, line: str) -> None:
        with self.objects.lock:
            data, _ = self.read(path)
            self.fs.pipe_file(self._p(path), _appended(data, line))

    def put_file(self, src: str, path: str) -> None:
        storage.copy(src, self.url(path))

    def exists(self, path: str) -> bool:
        return self.fs.exists(self._p(path))

    def sha256(self, path: str) -> str | None:
        return storage.sha256(self.url(path)) if self.fs.isfile(self._p(path)) else None  # streamed

    def list_dirs(self, path: str) -> list[str]:
        p = self._p(path)
        if not self.fs.exists(p):
            return []
        return sorted(
            e["name"].rstrip("/").rsplit("/", 1)[-1]
            for e in self.fs.ls(p, detail=True)
            if e["type"] == "directory"
        )


def open_store(root: str):
    if root.startswith("gs://"):
        return GCSStore(root)
    if "://" in root and not root.startswith("file://"):
        return FsspecStore(root)
    return LocalStore(root.removeprefix("file://"))

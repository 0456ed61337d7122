"""Compare-and-swap on one small object at a URL: how several processes, on several machines, agree on
an object without a server of their own (the registry's production pointer, a folder's lock).

    objects = objects_for(url)
    data, token = objects.read(url)              # (None, None): no such object
    token = objects.write_if(url, data, token)   # the new token, or None: the object is no longer `token`
    objects.delete_if(url, token) -> bool        # deleted only if it is still `token`

A token of None means "the object does not exist": write_if then creates it only if nobody else did.

- gs:// (GCSObjects): the token is the object's generation; every write and delete carries
  `if_generation_match` (0: the object must not exist), so the server refuses one based on a stale read
  (412 Precondition Failed). Through the google-cloud-storage client, which sends the precondition.
- any other fsspec URL (FsspecObjects: s3://, memory://): fsspec exposes no conditional write, so the
  read-compare-write runs under a lock of this process only: safe for the threads of one process, NOT
  for writers on several machines. The callers say so where it matters.
(Local folders use an OS lock instead: core.lock.)
"""

from __future__ import annotations

import errno
import hashlib
import threading
from typing import Any

from core.errors import UserError
from core.storage.paths import filesystem


class GCSObjects:
    """Objects of gs:// URLs, written and deleted under generation preconditions. `client`: a
    google.cloud.storage.Client (default: a new one; with STORAGE_EMULATOR_HOST, the emulator's)."""

    def __init__(self, client: Any = None):
        if client is None:
            try:
                from google.cloud import storage as gcs
            except ImportError as err:  # pragma: no cover - installed with apache-beam[gcp]
                raise UserError(
                    "gs:// needs google-cloud-storage (pip install google-cloud-storage)"
                ) from err
            client = gcs.Client()
        self.client = client

    def _blob(self, url: str, existing: bool = False):
        bucket, _, name = url.split("://", 1)[1].partition("/")
        bucket_handle = self.client.bucket(bucket)
        return bucket_handle.get_blob(name) if existing else bucket_handle.blob(name)

    def read(self, url: str) -> tuple[bytes | None, int | None]:
        from google.api_core.exceptions import NotFound, PreconditionFailed

        for _ in range(10):  # the object changed between its metadata and its download: read again
            blob = self._blob(url, existing=True)
            if blob is None:
                return None, None
            try:
                # Pinned to the generation reported, so data and token always match.
                return blob.download_as_bytes(if_generation_match=blob.generation), blob.generation
            except NotFound:
                return None, None
            except PreconditionFailed:
                continue
        raise OSError(f"{url} kept changing while it was read")

    def write_if(self, url: str, data: bytes, token: int | None, content_type: str = "application/json"):
        from google.api_core.exceptions import Forbidden, NotFound, PreconditionFailed

        blob = self._blob(url)
        try:
            blob.upload_from_string(data, content_type=content_type, if_generation_match=token or 0)
        except PreconditionFailed:
            return None
        except NotFound:  # the bucket: as an OSError, so that callers word it as any other
            raise FileNotFoundError(errno.ENOENT, "no such bucket", url) from None
        except Forbidden:
            raise PermissionError(errno.EACCES, "permission denied", url) from None
        return blob.generation

    def delete_if(self, url: str, token: int) -> bool:
        from google.api_core.exceptions import NotFound, PreconditionFailed

        try:
            self._blob(url).delete(if_generation_match=token)
        except (NotFound, PreconditionFailed):
            return False
        return True


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class FsspecObjects:
    """Objects of any other fsspec URL. The token is the content's sha256; the compare and the write run
    under `lock`, a lock of this process only (see the module's note)."""

    lock = threading.Lock()

    def read(self, url: str) -> tuple[bytes | None, str | None]:
        fs, p = filesystem(url)
        if not fs.exists(p):
            return None, None
        data = fs.cat_file(p)
        return data, _sha(data)

    def write_if(self, url: str, data: bytes, token: str | None, content_type: str = "") -> str | None:
        with self.lock:
            if self.read(url)[1] != token:
                return None
            fs, p = filesystem(url)
            fs.pipe_file(p, data)
            return _sha(data)

    def delete_if(self, url: str, token: str) -> bool:
        with self.lock:
            if token is None or self.read(url)[1] != token:
                return False
            fs, p = filesystem(url)
            fs.rm(p)
            return True


def objects_for(url: str, client: Any = None) -> GCSObjects | FsspecObjects:
    """The compare-and-swap of the store that holds `url` (`client`: a GCS client to use, e.g. a test's)."""
    if url.startswith(("gs://", "gcs://")):
        return GCSObjects(client)
    return FsspecObjects()

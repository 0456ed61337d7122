"""A strict stand-in for the google-cloud-storage client: every write and delete honours its
`if_generation_match` precondition, as GCS does and the emulator does not (docs/storage.md). The
compare-and-swap of the registry (promotion/stores.py) and of bucket locks (core/lock.py) is tested
against it; `fake_gcs` installs its PreconditionFailed as google.api_core's.

    client = FakeClient()
    client.buckets["b"].objects      {name: (data, generation)}
    client.buckets["b"].calls        [("upload" | "download" | "delete", name, if_generation_match)]
"""

from __future__ import annotations

import threading

import pytest


class PreconditionFailed(Exception):
    pass


class NotFound(Exception):
    pass


class FakeBlob:
    def __init__(self, bucket, name):
        self.bucket, self.name = bucket, name

    @property
    def generation(self):
        return self.bucket.objects.get(self.name, (None, None))[1]

    def download_as_bytes(self, if_generation_match=None):
        self.bucket.calls.append(("download", self.name, if_generation_match))
        if self.name not in self.bucket.objects:
            raise NotFound(self.name)
        data, gen = self.bucket.objects[self.name]
        if if_generation_match is not None and gen != if_generation_match:
            raise PreconditionFailed(self.name)
        return data

    def download_to_file(self, file_obj, if_generation_match=None):  # the client streams in chunks
        data = self.download_as_bytes(if_generation_match)
        for at in range(0, len(data), 3):
            file_obj.write(data[at : at + 3])

    def upload_from_string(self, data, content_type=None, if_generation_match=None):
        with self.bucket.lock:
            self.bucket.calls.append(("upload", self.name, if_generation_match))
            gen = self.bucket.objects.get(self.name, (None, 0))[1]
            if if_generation_match is not None and gen != if_generation_match:
                raise PreconditionFailed(self.name)
            self.bucket.objects[self.name] = (bytes(data), self.bucket.next_generation())

    def upload_from_filename(self, filename):
        with open(filename, "rb") as f:
            self.upload_from_string(f.read())

    def delete(self, if_generation_match=None):
        with self.bucket.lock:
            self.bucket.calls.append(("delete", self.name, if_generation_match))
            if self.name not in self.bucket.objects:
                raise NotFound(self.name)
            if if_generation_match is not None and self.generation != if_generation_match:
                raise PreconditionFailed(self.name)
            del self.bucket.objects[self.name]

    def exists(self):
        return self.name in self.bucket.objects


class FakeBucket:
    def __init__(self):
        self.objects: dict[str, tuple[bytes, int]] = {}
        self.calls: list[tuple] = []
        self.lock = threading.Lock()
        self._gen = 1000

    def next_generation(self):
        self._gen += 1
        return self._gen

    def blob(self, name):
        return FakeBlob(self, name)

    def get_blob(self, name):
        return FakeBlob(self, name) if name in self.objects else None


class FakeIterator(list):
    prefixes: set


class FakeClient:
    def __init__(self):
        self.buckets: dict[str, FakeBucket] = {}

    def bucket(self, name):
        return self.buckets.setdefault(name, FakeBucket())

    def list_blobs(self, bucket, prefix="", delimiter=None):
        it = FakeIterator(n for n in self.buckets[bucket].objects if n.startswith(prefix))
        it.prefixes = {
            prefix + n[len(prefix) :].split("/", 1)[0] + "/" for n in it if "/" in n[len(prefix) :]
        }
        return it


@pytest.fixture
def fake_gcs(monkeypatch):
    import google.api_core.exceptions

    monkeypatch.setattr(google.api_core.exceptions, "PreconditionFailed", PreconditionFailed)
    monkeypatch.setattr(google.api_core.exceptions, "NotFound", NotFound)
    return FakeClient()

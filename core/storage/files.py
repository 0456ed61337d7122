"""Single files: queries (exists, size, listings, globs), reading, and whole-file writes that readers
never see half done (a temporary name renamed into place locally, one upload on an object store).

A local write that fails (a full disk, a read-only file system, ...) removes its temporary file and
raises an OSError that names the file written: Python names none when a write or close of an open
file fails, and the one line the user gets (core.oserrors) must say where."""

from __future__ import annotations

import contextlib
import glob as _glob
import hashlib
import io
import json
import os
import shutil
import uuid
from typing import IO, Any

from core.errors import StorageFailed
from core.oserrors import named
from core.storage.paths import dirname, filesystem, has_glob, is_url, local_path, protocol

CHUNK = 1 << 22


# ------------------------------------------------------------------------------------------ queries


def exists(path: str) -> bool:
    if not is_url(path):
        return os.path.exists(local_path(path))
    fs, p = filesystem(path)
    return fs.exists(p)


def isfile(path: str) -> bool:
    if not is_url(path):
        return os.path.isfile(local_path(path))
    fs, p = filesystem(path)
    return fs.isfile(p)


def isdir(path: str) -> bool:
    """A local folder, or a prefix under which some object exists."""
    if not is_url(path):
        return os.path.isdir(local_path(path))
    fs, p = filesystem(path)
    return fs.isdir(p)


def size(path: str) -> int:
    if not is_url(path):
        return os.path.getsize(local_path(path))
    fs, p = filesystem(path)
    return int(fs.size(p))


def listdir(path: str) -> list[str]:
    """Names (not paths) of the entries of a folder, sorted; [] when it does not exist."""
    if not is_url(path):
        p = local_path(path)
        return sorted(os.listdir(p)) if os.path.isdir(p) else []
    fs, p = filesystem(path)
    if not fs.exists(p):
        return []
    return sorted({e.rstrip("/").rsplit("/", 1)[-1] for e in fs.ls(p, detail=False)} - {""})


def subdirs(path: str) -> list[str]:
    """Names of the sub-folders (prefixes) of a folder, sorted."""
    if not is_url(path):
        p = local_path(path)
        return [n for n in listdir(p) if os.path.isdir(os.path.join(p, n))]
    fs, p = filesystem(path)
    if not fs.exists(p):
        return []
    return sorted(
        e["name"].rstrip("/").rsplit("/", 1)[-1] for e in fs.ls(p, detail=True) if e["type"] == "directory"
    )


def glob(pattern: str) -> list[str]:
    """Files matching a glob (or the path itself when it names a file), sorted, as full paths/URLs."""
    if not is_url(pattern):
        p = local_path(pattern)
        found = _glob.glob(p) if has_glob(p) else ([p] if os.path.exists(p) else [])
        return sorted(f for f in found if os.path.isfile(f))
    fs, p = filesystem(pattern)
    found = fs.glob(p) if has_glob(p) else ([p] if fs.exists(p) else [])
    return sorted(fs.unstrip_protocol(f) for f in found if fs.isfile(f))


def match(pattern: str) -> list[tuple[str, int]]:
    """[(path, size in bytes)] of the files a path or glob names, sorted by path."""
    return [(p, size(p)) for p in glob(pattern)]


# ------------------------------------------------------------------------------------------ reading


def open_read(path: str) -> IO[bytes]:
    """A seekable binary reader of the raw bytes (compressed files are NOT decompressed), with the
    full io.BufferedReader interface (fsspec's own files lack readline(size), which readers bound lines
    with)."""
    if not is_url(path):
        return open(local_path(path), "rb")
    fs, p = filesystem(path)
    return io.BufferedReader(fs.open(p, "rb"), buffer_size=1 << 20)


def read_bytes(path: str) -> bytes:
    with open_read(path) as f:
        return f.read()


def read_text(path: str) -> str:
    return read_bytes(path).decode("utf-8")


def read_json(path: str) -> Any:
    return json.loads(read_text(path))


def sha256(path: str) -> str:
    """Content hash of a file, streamed."""
    digest = hashlib.sha256()
    with open_read(path) as f:
        while block := f.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def checksum(path: str, info: dict | None = None) -> str:
    """A content checksum without reading the file where the store keeps one (GCS md5 or crc32c, S3
    ETag), e.g. "md5Hash:XUFAKrxLKna5cZ2REBfFkg=="; else the sha256 of the content. `info`: the
    object's metadata when the caller has it already."""
    if is_url(path):
        if info is None:
            fs, p = filesystem(path)
            info = fs.info(p)
        for key in ("md5Hash", "crc32c", "ETag", "etag"):
            if info.get(key):
                return f"{key}:{str(info[key]).strip(chr(34))}"
    return f"sha256:{sha256(path)}"


# ------------------------------------------------------------------------------------------ writing


def local_makedirs(folder: str) -> None:
    """os.makedirs(folder, exist_ok=True), but a symlink loop on the way is named as one (ELOOP):
    os.makedirs only says "File exists" there."""
    try:
        os.makedirs(folder, exist_ok=True)
    except FileExistsError:
        os.stat(folder)  # ELOOP (or ENOENT: a dangling link) names the cause; a plain file passes
        raise


def makedirs(path: str) -> None:
    """Create a folder (and its parents) where folders exist; object stores need none."""
    if not is_url(path):
        local_makedirs(local_path(path))
        return
    fs, p = filesystem(path)
    if protocol(path) not in ("gs", "gcs", "s3", "s3a"):
        fs.makedirs(p, exist_ok=True)


def open_write(path: str) -> IO[bytes]:
    """A binary writer that creates the file (parent folders too). Not atomic locally: use
    write_bytes for whole small files, or write under a temporary name and rename. Its errors name
    the file (_NamedWriter)."""
    if not is_url(path):
        p = local_path(path)
        with _naming(p):
            local_makedirs(os.path.dirname(os.path.abspath(p)))
            return _NamedWriter(p, open(p, "wb"))
    makedirs(dirname(path))
    fs, p = filesystem(path)
    with _naming(path, doing="writing"):
        return _NamedWriter(path, fs.open(p, "wb"))


def write_bytes(path: str, data: bytes) -> None:
    """Write a whole file atomically: readers see the old content or the new, never a part."""
    if not is_url(path):
        p = local_path(path)
        folder = os.path.dirname(os.path.abspath(p))
        tmp = os.path.join(folder, f".{os.path.basename(p)}.tmp-{uuid.uuid4().hex[:8]}")
        with _naming(p, tmp), _removed_on_failure(tmp):
            local_makedirs(folder)
            with open(tmp, "xb") as f:  # mode from the umask (mkstemp would make it 0600)
                f.write(data)
            os.replace(tmp, p)
        return
    makedirs(dirname(path))
    fs, p = filesystem(path)
    with _naming(path, doing="writing"):
        fs.pipe_file(p, data)  # one upload: the object appears whole


def write_text(path: str, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def write_json(path: str, obj: Any, indent: int | None = 2) -> None:
    write_text(path, json.dumps(obj, indent=indent, ensure_ascii=False) + "\n")


def append_text(path: str, text: str) -> None:
    """Append to a file. On an object store this rewrites the object (objects are immutable): keep it
    for small logs, or write locally and upload (see Mirror)."""
    if not is_url(path):
        p = local_path(path)
        with _naming(p):
            local_makedirs(os.path.dirname(os.path.abspath(p)))
            with open(p, "a", encoding="utf-8") as f:
                f.write(text)
        return
    old = read_bytes(path) if exists(path) else b""
    write_bytes(path, old + text.encode("utf-8"))


def remove(path: str, recursive: bool = False) -> None:
    """Delete a file (or, recursive, a folder); nothing when it does not exist."""
    if not is_url(path):
        p = local_path(path)
        if os.path.isdir(p) and not os.path.islink(p):
            if recursive:
                shutil.rmtree(p)
            else:
                os.rmdir(p)
        elif os.path.lexists(p):
            os.remove(p)
        return
    fs, p = filesystem(path)
    if fs.exists(p):
        fs.rm(p, recursive=recursive)


def copy(src: str, dst: str) -> None:
    """Copy one file: server-side within one object store, streamed otherwise. The destination
    appears whole (a temporary name locally, one upload remotely)."""
    if is_url(src) and is_url(dst) and protocol(src) == protocol(dst):
        fs, src_path = filesystem(src)
        makedirs(dirname(dst))
        with _naming(dst, doing="writing"):
            fs.copy(src_path, filesystem(dst)[1])
        return
    if not is_url(dst):
        dst_path = local_path(dst)
        tmp = os.path.join(
            os.path.dirname(os.path.abspath(dst_path)),
            f".{os.path.basename(dst_path)}.tmp-{uuid.uuid4().hex[:8]}",
        )
        with open_read(src) as reader, _naming(dst_path, tmp), _removed_on_failure(tmp):
            local_makedirs(os.path.dirname(os.path.abspath(dst_path)))
            with open(tmp, "xb") as writer:
                shutil.copyfileobj(reader, writer, CHUNK)
            os.replace(tmp, dst_path)
        return
    if not is_url(src):  # local -> remote: one streamed upload
        fs, dst_path = filesystem(dst)
        makedirs(dirname(dst))
        with _naming(dst, doing="writing"):
            fs.put_file(local_path(src), dst_path)
        return
    with open_read(src) as reader, open_write(dst) as writer:
        shutil.copyfileobj(reader, writer, CHUNK)


def rename(src: str, dst: str) -> None:
    """Move a file, replacing dst. Atomic locally; copy then delete on an object store (gcsfs's own
    move tries an API that emulators do not serve, and retries for half a minute first)."""
    if not is_url(src) and not is_url(dst):
        local_makedirs(os.path.dirname(os.path.abspath(local_path(dst))))
        os.replace(local_path(src), local_path(dst))
        return
    copy(src, dst)
    remove(src)


# ------------------------------------------------------------------------------------- failed writes


@contextlib.contextmanager
def _naming(path: str, tmp: str | None = None, doing: str = "writing"):
    """An OSError of the block names `path`, the file the caller writes (oserrors.named); so does
    a request to a store that failed for good (StorageFailed: its URL may name no object)."""
    try:
        yield
    except OSError as err:
        raise named(err, path, instead_of=tmp)  # noqa: B904 -- the same error, named
    except StorageFailed as err:
        raise err.at(path, doing) from None


@contextlib.contextmanager
def _removed_on_failure(tmp: str):
    """Remove the temporary file `tmp` when the block raises (anything: a full disk, Ctrl-C). Its
    removal failing too (an I/O error) must not hide the error that says why."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(OSError):
            if os.path.lexists(tmp):
                os.remove(tmp)
        raise


class _NamedWriter:
    """A file open for writing (open_write) whose errors name it: a full disk shows at a write or at
    close, where Python's OSError names no file; an upload's request that failed for good names its
    URL, which for a resumable upload is no object's."""

    def __init__(self, path: str, file: IO[bytes]):
        self.path = path
        self._file = file

    def write(self, data) -> int:
        with _naming(self.path):
            return self._file.write(data)

    def flush(self) -> None:
        with _naming(self.path):
            self._file.flush()

    def close(self) -> None:
        with _naming(self.path):
            self._file.close()

    def __getattr__(self, name: str):  # closed, name, fileno, tell, ...: the file's own
        return getattr(self._file, name)

    def __enter__(self) -> _NamedWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

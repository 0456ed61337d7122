"""Storage: every path the factory reads or writes, a local path or any fsspec URL.

Local paths (and file:// URLs) go through the operating system: parent folders are created, and a
whole-file write goes to a temporary name that is renamed into place, so a reader never sees half a
file. URLs (gs://, s3://, memory://, ...) go through fsspec. An object store has no folders and no
rename: a folder is a prefix, an object appears whole when its upload ends, and a rename is a copy
then a delete. The layers above never need more than that. A stage folder is finished when its
manifest.json exists (written last), a checkpoint when its checksums.json exists (written last).

Listings are never cached: another process (the trainer, a Beam worker) may have written since.

With STORAGE_EMULATOR_HOST set (tests, `make rehearse`), gs:// goes to that endpoint without
credentials, and gcsfs's bucket-type probe is turned off: it asks a gRPC service that an emulator
does not serve and would wait a minute per bucket before giving up.

This is the one module that touches user-given paths; everything else calls it.
"""

from __future__ import annotations

import contextlib
import glob as _glob
import hashlib
import io
import json
import os
import posixpath
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from typing import IO, Any

from pipelines.core.errors import UserError

# The package each common protocol needs (fsspec names it too, in a longer message).
_PACKAGES = {"gs": "gcsfs", "gcs": "gcsfs", "s3": "s3fs", "s3a": "s3fs", "az": "adlfs", "abfs": "adlfs"}
_CHUNK = 1 << 22


# ------------------------------------------------------------------------------------------ names


def is_url(path: str) -> bool:
    """A URL other than file:// (object stores, memory://): no OS calls apply to it."""
    return "://" in path and not path.startswith("file://")


def protocol(path: str) -> str:
    return path.split("://", 1)[0] if "://" in path else "file"


def local_path(path: str) -> str:
    """A local path or file:// URL as an OS path."""
    return path.removeprefix("file://")


def absolute(path: str) -> str:
    """Local paths become absolute (subprocesses run elsewhere; registries record them); URLs stay."""
    return path if is_url(path) else os.path.abspath(local_path(path))


def join(base: str, *parts: str) -> str:
    if is_url(base):
        return "/".join([base.rstrip("/"), *(p.strip("/") for p in parts if p)])
    return os.path.join(local_path(base), *parts)


def basename(path: str) -> str:
    return posixpath.basename(path.rstrip("/"))


def dirname(path: str) -> str:
    if is_url(path):
        head, _, rest = path.partition("://")
        return f"{head}://{posixpath.dirname(rest.rstrip('/'))}"
    return os.path.dirname(local_path(path).rstrip("/"))


def has_glob(path: str) -> bool:
    return any(c in path for c in "*?[")


# ------------------------------------------------------------------------------------ filesystems


def filesystem(path: str):
    """(fsspec filesystem, path inside it) of a URL."""
    import fsspec

    proto = protocol(path)
    options: dict[str, Any] = {}
    if proto in ("gs", "gcs", "s3", "s3a"):
        options["use_listings_cache"] = False
    emulator = os.environ.get("STORAGE_EMULATOR_HOST") if proto in ("gs", "gcs") else None
    try:
        if emulator:
            # The plain GCSFileSystem: gcsfs's default class (GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT, on by
            # default) first probes the bucket type over gRPC, which an emulator never answers.
            from gcsfs.core import GCSFileSystem

            url = emulator if "://" in emulator else f"http://{emulator}"
            fs = GCSFileSystem(token="anon", endpoint_url=url, **options)
        else:
            fs = fsspec.filesystem(proto, **options)
    except ImportError as err:
        package = _PACKAGES.get(proto)
        hint = f" (pip install {package})" if package else ""
        raise UserError(f"{path}: {proto}:// needs a package that is not installed{hint}") from err
    except ValueError as err:
        raise UserError(f"{path}: unknown storage protocol {proto!r}") from err
    return fs, fs._strip_protocol(path)


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


def check_writable_folder(path: str, what: str) -> None:
    """Refuse, in one line, a folder that cannot be written: a file, a path under a file, a local
    folder this user may not write, or a bucket that does not exist. Creates nothing; `what` names the
    folder the way the user gave it (e.g. "--registry")."""
    if is_url(path):
        if isfile(path):
            raise UserError(f"{what} {path} is a file; give a folder")
        if protocol(path) in ("gs", "gcs", "s3", "s3a"):
            fs, p = filesystem(path)
            bucket = p.split("/", 1)[0]
            if not fs.exists(bucket):
                raise UserError(f"{what} {path}: bucket {bucket} does not exist (or is not visible)")
        return
    p = os.path.abspath(local_path(path))
    if os.path.isfile(p):
        raise UserError(f"{what} {path} is a file; give a folder")
    existing = p
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise UserError(f"{what} {path} cannot be created: {existing} is a file")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UserError(f"{what} {path} is not writable: permission denied on {existing}")


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
    h = hashlib.sha256()
    with open_read(path) as f:
        while block := f.read(_CHUNK):
            h.update(block)
    return h.hexdigest()


def checksum(path: str) -> str:
    """A content checksum without reading the file where the store keeps one (GCS md5 or crc32c, S3
    ETag), e.g. "md5Hash:XUFAKrxLKna5cZ2REBfFkg=="; else the sha256 of the content."""
    if is_url(path):
        fs, p = filesystem(path)
        info = fs.info(p)
        for key in ("md5Hash", "crc32c", "ETag", "etag"):
            if info.get(key):
                return f"{key}:{str(info[key]).strip(chr(34))}"
    return f"sha256:{sha256(path)}"


# ------------------------------------------------------------------------------------------ writing


def makedirs(path: str) -> None:
    """Create a folder (and its parents) where folders exist; object stores need none."""
    if not is_url(path):
        os.makedirs(local_path(path), exist_ok=True)
        return
    fs, p = filesystem(path)
    if protocol(path) not in ("gs", "gcs", "s3", "s3a"):
        fs.makedirs(p, exist_ok=True)


def open_write(path: str) -> IO[bytes]:
    """A binary writer that creates the file (parent folders too). Not atomic locally: use
    write_bytes for whole small files, or write under a temporary name and rename."""
    if not is_url(path):
        p = local_path(path)
        os.makedirs(os.path.dirname(os.path.abspath(p)), exist_ok=True)
        return open(p, "wb")
    makedirs(dirname(path))
    fs, p = filesystem(path)
    return fs.open(p, "wb")


def write_bytes(path: str, data: bytes) -> None:
    """Write a whole file atomically: readers see the old content or the new, never a part."""
    if not is_url(path):
        p = local_path(path)
        folder = os.path.dirname(os.path.abspath(p))
        os.makedirs(folder, exist_ok=True)
        tmp = os.path.join(folder, f".{os.path.basename(p)}.tmp-{uuid.uuid4().hex[:8]}")
        try:
            with open(tmp, "xb") as f:  # mode from the umask (mkstemp would make it 0600)
                f.write(data)
            os.replace(tmp, p)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
        return
    makedirs(dirname(path))
    fs, p = filesystem(path)
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
        os.makedirs(os.path.dirname(os.path.abspath(p)), exist_ok=True)
        with open(p, "a", encoding="utf-8") as f:
            f.write(text)
        return
    old = read_bytes(path) if exists(path) else b""
    write_bytes(path, old + text.encode("utf-8"))


def write_folder(path: str, files: dict[str, bytes], marker: str) -> None:
    """Write a folder of files that must appear complete or not at all (a checkpoint); `marker` (one of
    `files`) is what readers take as "complete". Locally: a hidden temporary folder beside it, renamed
    into place (atomic). On an object store there is no folder rename: the files are written in place
    and the marker LAST, after removing whatever an earlier attempt left there."""
    ordered = {name: data for name, data in files.items() if name != marker}
    ordered[marker] = files[marker]
    if is_url(path):
        remove(path, recursive=True)
        for name, data in ordered.items():
            write_bytes(join(path, name), data)
        return
    final = os.path.abspath(local_path(path))
    parent = os.path.dirname(final)
    os.makedirs(parent, exist_ok=True)
    tmp = os.path.join(parent, f".{os.path.basename(final)}.tmp-{uuid.uuid4().hex[:8]}")
    os.makedirs(tmp)
    try:
        for name, data in ordered.items():
            with open(os.path.join(tmp, name), "xb") as f:
                f.write(data)
        if os.path.exists(final):  # a leftover of an earlier attempt
            shutil.rmtree(final)
        os.replace(tmp, final)
    finally:
        if os.path.exists(tmp):
            shutil.rmtree(tmp)


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
        fs, s = filesystem(src)
        makedirs(dirname(dst))
        fs.copy(s, filesystem(dst)[1])
        return
    if not is_url(dst):
        d = local_path(dst)
        os.makedirs(os.path.dirname(os.path.abspath(d)), exist_ok=True)
        tmp = os.path.join(
            os.path.dirname(os.path.abspath(d)), f".{os.path.basename(d)}.tmp-{uuid.uuid4().hex[:8]}"
        )
        try:
            with open_read(src) as r, open(tmp, "xb") as w:
                shutil.copyfileobj(r, w, _CHUNK)
            os.replace(tmp, d)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
        return
    if not is_url(src):  # local -> remote: one streamed upload
        fs, d = filesystem(dst)
        makedirs(dirname(dst))
        fs.put_file(local_path(src), d)
        return
    with open_read(src) as r, open_write(dst) as w:
        shutil.copyfileobj(r, w, _CHUNK)


def rename(src: str, dst: str) -> None:
    """Move a file, replacing dst. Atomic locally; copy then delete on an object store (gcsfs's own
    move tries an API that emulators do not serve, and retries for half a minute first)."""
    if not is_url(src) and not is_url(dst):
        os.makedirs(os.path.dirname(os.path.abspath(local_path(dst))), exist_ok=True)
        os.replace(local_path(src), local_path(dst))
        return
    copy(src, dst)
    remove(src)


def put_dir(local_dir: str, dst: str) -> list[str]:
    """Copy every file under a local folder to dst (a folder or URL prefix). Returns the paths written."""
    written = []
    for folder, _, files in os.walk(local_dir):
        for name in sorted(files):
            src = os.path.join(folder, name)
            rel = os.path.relpath(src, local_dir).replace(os.sep, "/")
            target = join(dst, *rel.split("/"))
            copy(src, target)
            written.append(target)
    return written


def get_dir(src: str, local_dir: str) -> list[str]:
    """Copy every file under src (a folder or URL prefix) into a local folder. Returns local paths."""
    if not is_url(src):
        shutil.copytree(local_path(src), local_dir, dirs_exist_ok=True)
        return [os.path.join(f, n) for f, _, ns in os.walk(local_dir) for n in ns]
    fs, p = filesystem(src)
    out = []
    for f in sorted(fs.find(p)):
        rel = f[len(p.rstrip("/")) + 1 :]
        target = os.path.join(local_dir, *rel.split("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        fs.get_file(f, target)
        out.append(target)
    return out


# ---------------------------------------------------------------------------------- local stand-ins


@contextlib.contextmanager
def local_file(path: str) -> Iterator[str]:
    """A local path holding the content of `path` (the path itself when it is local; a temporary
    download otherwise, deleted afterwards), for libraries that only open local files."""
    if not is_url(path):
        yield local_path(path)
        return
    with tempfile.TemporaryDirectory(prefix="albert-get-") as tmp:
        target = os.path.join(tmp, basename(path))
        copy(path, target)
        yield target


@contextlib.contextmanager
def local_folder_for(dst: str) -> Iterator[str]:
    """A local folder to write into, whose files end up in `dst`: `dst` itself when it is local; a
    temporary folder uploaded to `dst` on success (nothing is uploaded when the block raises)."""
    if not is_url(dst):
        os.makedirs(local_path(dst), exist_ok=True)
        yield local_path(dst)
        return
    with tempfile.TemporaryDirectory(prefix="albert-put-") as tmp:
        yield tmp
        put_dir(tmp, dst)


class Mirror:
    """A local working copy of a folder's growing files (metrics.jsonl, TensorBoard events,
    curves.png). Local folders are used directly. For a URL the files live in a temporary folder:
    `pull` fetches what exists there (a resumed run appends to it), `sync` uploads the files that
    changed since the last sync. Nothing is ever deleted remotely."""

    def __init__(self, folder: str, names: tuple[str, ...] = ()):
        self.folder = folder
        self.remote = is_url(folder)
        self._tmp = tempfile.TemporaryDirectory(prefix="albert-run-") if self.remote else None
        self.local = self._tmp.name if self._tmp else local_path(folder)
        self._synced: dict[str, tuple[int, int]] = {}
        os.makedirs(self.local, exist_ok=True)

    def path(self, *parts: str) -> str:
        """The local path of a file of the folder."""
        return os.path.join(self.local, *parts)

    def pull(self, *names: str) -> None:
        """Fetch these files or sub-folders from the remote folder when they exist there."""
        if not self.remote:
            return
        for name in names:
            src = join(self.folder, name)
            if isfile(src):
                copy(src, self.path(name))
            elif isdir(src):
                get_dir(src, self.path(name))
        self._synced = self._state()

    def _state(self) -> dict[str, tuple[int, int]]:
        state = {}
        for folder, _, files in os.walk(self.local):
            for name in files:
                p = os.path.join(folder, name)
                st = os.stat(p)
                state[os.path.relpath(p, self.local)] = (st.st_size, st.st_mtime_ns)
        return state

    def sync(self) -> list[str]:
        """Upload the files that changed since the last sync; returns their remote paths."""
        if not self.remote:
            return []
        now = self._state()
        changed = [rel for rel, st in now.items() if self._synced.get(rel) != st]
        written = []
        for rel in sorted(changed):
            target = join(self.folder, *rel.split(os.sep))
            copy(os.path.join(self.local, rel), target)
            written.append(target)
        self._synced = now
        return written

    def close(self) -> None:
        self.sync()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

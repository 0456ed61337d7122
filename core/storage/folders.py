"""Folders: a folder that appears whole or not at all (a checkpoint), whole-folder transfers, local
stand-ins for remote files and folders (for libraries that only open or write local paths), and
checks that a folder can be written."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator

from core.errors import UserError
from core.oserrors import named
from core.storage.files import copy, isdir, isfile, local_makedirs, remove
from core.storage.paths import basename, filesystem, is_url, join, local_path, protocol


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


@contextlib.contextmanager
def staged_folder(path: str, marker: str) -> Iterator[str]:
    """A local folder for the block to fill, that becomes `path` complete or not at all; `marker` (a
    file the block writes) is what readers take as "complete". Files are written as files, never
    gathered in memory (a checkpoint's weights). Locally: a hidden temporary folder beside `path`,
    renamed into place when the block ends (atomic). On an object store there is no folder rename: a
    local temporary folder whose files are uploaded (streamed) after removing whatever an earlier
    attempt left at `path`, the marker LAST. Nothing appears when the block raises; an upload that
    fails half way removes what it uploaded (a folder without its marker is no checkpoint, but it
    holds space and would be listed)."""
    if is_url(path):
        with tempfile.TemporaryDirectory(prefix="albert-put-") as tmp:
            yield tmp
            remove(path, recursive=True)
            try:
                for name in [n for n in sorted(os.listdir(tmp)) if n != marker] + [marker]:
                    copy(os.path.join(tmp, name), join(path, name))  # one streamed upload each
            except BaseException:
                with contextlib.suppress(Exception):
                    remove(path, recursive=True)
                raise
        return
    final = os.path.abspath(local_path(path))
    parent = os.path.dirname(final)
    local_makedirs(parent)
    tmp = os.path.join(parent, f".{os.path.basename(final)}.tmp-{uuid.uuid4().hex[:8]}")
    os.makedirs(tmp)
    try:
        yield tmp
        if os.path.exists(final):  # a leftover of an earlier attempt
            shutil.rmtree(final)
        os.replace(tmp, final)
    finally:
        if os.path.exists(tmp):  # the block failed (a full disk, Ctrl-C): what it wrote goes
            shutil.rmtree(tmp, ignore_errors=True)  # (an error here must not hide the one that says why)


def write_folder(path: str, files: dict[str, bytes], marker: str) -> None:
    """Write a folder of small files that must appear complete or not at all (staged_folder);
    `marker` (one of `files`) is what readers take as "complete"."""
    with staged_folder(path, marker) as tmp:
        for name, data in files.items():
            with open(os.path.join(tmp, name), "xb") as f:
                f.write(data)


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
        local_makedirs(local_path(dst))
        yield local_path(dst)
        return
    with tempfile.TemporaryDirectory(prefix="albert-put-") as tmp:
        yield tmp
        put_dir(tmp, dst)


@contextlib.contextmanager
def local_file_for(dst: str) -> Iterator[str]:
    """A local path for the block to write one file at, that becomes `dst` whole when the block ends:
    locally a hidden temporary name beside `dst`, renamed into place (atomic); for a URL a temporary
    file, then one streamed upload. Nothing appears at `dst` when the block raises. For files too big
    to build in memory first (write_bytes takes the whole content)."""
    if is_url(dst):
        with tempfile.TemporaryDirectory(prefix="albert-put-") as tmp:
            target = os.path.join(tmp, basename(dst))
            yield target
            copy(target, dst)
        return
    final = os.path.abspath(local_path(dst))
    local_makedirs(os.path.dirname(final))
    tmp = os.path.join(os.path.dirname(final), f".{os.path.basename(final)}.tmp-{uuid.uuid4().hex[:8]}")
    try:
        yield tmp
        os.replace(tmp, final)
    except OSError as err:  # name the file the caller writes, not its temporary name
        raise named(err, dst, instead_of=tmp)  # noqa: B904 -- the same error, named
    finally:
        if os.path.exists(tmp):
            with contextlib.suppress(OSError):
                os.remove(tmp)


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

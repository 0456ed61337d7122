"""One line for an operating-system error, whatever command met it (flows/cli.py prints it).

    no space left on device writing out/corpus/_tmp/spill/a.bin (12 MB free); free space and rerun
    the same command: it resumes

Each common cause is named as such, with the way forward: a full disk or quota (with the space left),
a read-only file system, a permission refused, a symlink loop, an I/O error of the device. The rest
keep the system's own words and the path.

An OS error does not always arrive as an OSError: Beam re-raises a worker's error in the launcher as a
RuntimeError whose message holds `OSError: [Errno 28] No space left on device: 'PATH'`, and
safetensors (Rust) says `I/O error: No space left on device (os error 28)`. `find` recovers it from the
exception chain or from such a message, so that it gets the same one line; an error without an errno
anywhere (a bug) is left alone and keeps its traceback.
"""

from __future__ import annotations

import errno
import os
import re
import shutil

RERUN = "rerun the same command: it resumes"
# Python's `[Errno 28] No space left on device: '/out/a.bin'` (the path, repr-quoted, is optional),
# and the Rust standard library's `No space left on device (os error 28)` (no path).
_PYTHON_TEXT = re.compile(r"\[Errno (\d+)\][^:\[\]\n]*(?:: (['\"])(.*?)\2)?")
_RUST_TEXT = re.compile(r"\(os error (\d+)\)")


def find(err: BaseException) -> OSError | None:
    """The OS error behind `err`: `err` itself, one in its chain (`__cause__`, `__context__`), or one
    named in the message of an error that carried it as text (above). None when there is none."""
    chain: list[BaseException] = []
    todo: list[BaseException | None] = [err]
    while todo:
        error = todo.pop(0)
        if error is None or any(error is seen for seen in chain):
            continue
        if isinstance(error, OSError) and error.errno is not None:
            return error
        chain.append(error)
        todo += [error.__cause__, error.__context__]
    for error in chain:
        text = str(error)
        if match := _PYTHON_TEXT.search(text):
            code, path = int(match.group(1)), match.group(3)
        elif match := _RUST_TEXT.search(text):
            code, path = int(match.group(1)), None
        else:
            continue
        return OSError(code, os.strerror(code), path)
    return None


def named(err: OSError, path: str, instead_of: str | None = None) -> OSError:
    """`err`, naming `path` when it names no file (a write or close of an open file: "[Errno 28] No
    space left on device", and the one line must say where) or names `instead_of` (the temporary name
    a file is written under, gone by the time anyone reads the message). Returns `err`, to raise."""
    if err.filename is None or (instead_of is not None and err.filename == instead_of):
        err.filename = path
        if err.filename2 is not None:  # os.replace(tmp, path) names both
            del err.filename2
    return err


def free_mb(path: str) -> int | None:
    """Megabytes free on the file system that holds `path` (its nearest existing parent), or None."""
    existing = os.path.abspath(path)
    while existing and not os.path.exists(existing):
        parent = os.path.dirname(existing)
        if parent == existing:
            return None
        existing = parent
    try:
        return shutil.disk_usage(existing).free // (1 << 20)
    except OSError:
        return None


def describe(err: OSError, path: str | None = None, doing: str = "writing") -> str:
    """The one line for `err` met while `doing` (writing, reading) `path` (default: the error's own
    file name). Local paths only for the free space; URLs get none."""
    path = path or err.filename or "?"
    path = os.fsdecode(path) if isinstance(path, bytes) else str(path)
    code = err.errno
    if code in (errno.ENOSPC, errno.EDQUOT):
        what = "no space left on device" if code == errno.ENOSPC else "disk quota exceeded"
        free = None if "://" in path else free_mb(path)
        room = f" ({free} MB free)" if free is not None else ""
        return f"{what} {doing} {path}{room}; free space and {RERUN}"
    if code == errno.EROFS:
        return f"read-only file system: cannot write {path}; give a folder on a writable file system"
    if code in (errno.EACCES, errno.EPERM):
        return f"permission denied {doing} {path}; give a path this user may {'write' if doing == 'writing' else 'read'}"
    if code == errno.ELOOP:
        return f"symlink loop at {path} (a link that points back to itself); remove or fix the link"
    if code == errno.EIO:
        return f"I/O error {doing} {path} (the disk or network file system failed); check it, then {RERUN}"
    name = errno.errorcode.get(code, "") if code is not None else ""
    reason = err.strerror or str(err)
    return f"{reason}{f' ({name})' if name else ''} {doing} {path}"

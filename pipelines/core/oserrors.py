"""One line for an operating-system error, whatever command met it (flows/cli.py prints it).

    no space left on device writing out/corpus/_tmp/spill/a.bin (12 MB free); free space and rerun
    the same command: it resumes

Each common cause is named as such, with the way forward: a full disk or quota (with the space left),
a read-only file system, a permission refused, a symlink loop, an I/O error of the device. The rest
keep the system's own words and the path.
"""

from __future__ import annotations

import errno
import os
import shutil

RERUN = "rerun the same command: it resumes"


def free_mb(path: str) -> int | None:
    """Megabytes free on the file system that holds `path` (its nearest existing parent), or None."""
    p = os.path.abspath(path)
    while p and not os.path.exists(p):
        parent = os.path.dirname(p)
        if parent == p:
            return None
        p = parent
    try:
        return shutil.disk_usage(p).free // (1 << 20)
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

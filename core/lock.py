"""One writer per folder: the lock a command holds on the folder it writes, for the length of its run.

    @lock.scope()                                    # or `with lock.scope():`
    def run_stage(...):
        lock.take(out, "corpus")                     # Busy when another process holds it
        ...                                          # released when the scope ends, whatever ends it

Where the lock lives, and what frees it when its holder dies:

- a local folder: `fcntl.flock` on FOLDER/.albert-lock. The kernel releases it when the holding
  process ends, kill -9 included, so a rerun takes it at once. The file names the holder (host, pid,
  stage, since) for the refusal. A release removes the file (while still holding it): a file found on
  taking the lock is what a holder that died left, and the taker says that it takes over.
- a URL (gs://, s3://, memory://): the object FOLDER/.albert-lock, created only if it does not exist
  (core.storage.cas; on GCS a generation precondition). The holder renews a lease: it
  rewrites the object every lease/3, under the generation it wrote last. A lock whose lease ran out (its
  holder stopped renewing: killed, frozen, cut off) or whose holder ran on this host and is no longer
  running is taken over, with a message; a release deletes the object only if it is still ours.
  Leases compare the holder's clock with the taker's: hosts must agree on the time within a lease.

A scope releases the locks taken inside it when it ends (a command's run; a flow's stage function),
so a long-lived process that runs stage after stage, or retries one, never keeps a folder locked.
Taking a lock that an enclosing scope of the same thread already holds is a no-op (a flow the CLI
runs in-process locks what the CLI locked). A lock taken outside any scope is released by
`release()`, when its handle is garbage-collected, or at exit.
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import datetime as _dt
import errno
import fcntl
import json
import os
import socket
import sys
import threading
import time
import weakref
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

from core.storage import cas
from core.storage.paths import is_url, join, local_path

NAME = ".albert-lock"
LEASE_S = 120.0  # a bucket lock not renewed for this long is free (renewed every LEASE_S / 3)
HOST = socket.gethostname()


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def running(pid: int) -> bool:
    """Whether process `pid` of this host still runs (a zombie, killed but not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


@dataclass
class Holder:
    """Who holds a lock, as written in it."""

    host: str
    pid: int
    stage: str
    since: str  # UTC, ISO 8601
    renewed: float = 0.0  # time.time() of the last renewal (bucket locks)
    lease_s: float = 0.0

    @classmethod
    def me(cls, stage: str, lease_s: float = 0.0) -> Holder:
        now = time.time()
        since = _dt.datetime.fromtimestamp(now, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return cls(HOST, os.getpid(), stage, since, now, lease_s)

    def dumps(self) -> bytes:
        return (json.dumps(asdict(self)) + "\n").encode()

    @classmethod
    def parse(cls, data: bytes | None) -> Holder | None:
        """The holder recorded in `data`; None when there is none or it does not parse."""
        try:
            fields = json.loads(data or b"")
            return cls(str(fields["host"]), int(fields["pid"]), str(fields["stage"]), str(fields["since"]),
                       float(fields.get("renewed", 0)), float(fields.get("lease_s", 0)))  # fmt: skip
        except (ValueError, KeyError, TypeError):
            return None

    def where(self) -> str:
        return f"host {self.host}, pid {self.pid}, since {self.since}"

    def gone(self) -> str | None:
        """Why this holder no longer holds its (bucket) lock, or None while it does."""
        if self.host == HOST and not running(self.pid):
            return "no longer running"
        age = time.time() - self.renewed
        if self.lease_s and age > self.lease_s:
            return f"its lease of {self.lease_s:.0f} s ran out: not renewed for {age:.0f} s"
        return None


class Busy(Exception):
    """The lock is held by another live process. str(): how the refusal goes on after "X is "."""

    def __init__(self, holder: Holder | None, orphaned: bool = False):
        super().__init__(holder)
        self.holder, self.orphaned = holder, orphaned

    def __str__(self) -> str:
        holder = self.holder
        if holder is None:
            return "in use by another albert process (just starting); wait for it to finish, or stop it"
        if self.orphaned:
            return (
                f"in use: `albert {holder.stage}` ({holder.where()}) is no longer running, but processes it started "
                f"still hold its lock; wait for them to end, or stop them"
            )
        return (
            f"in use by another `albert {holder.stage}` ({holder.where()}); wait for it to finish, or stop it"
        )


class Lock:
    """A held lock. `previous`/`reason`: the dead holder this one took over, and why it was free."""

    folder: str
    key: str = ""  # the folder, resolved (take: one lock per folder and scope chain)
    previous: Holder | None = None
    reason: str | None = None

    def release(self) -> None:
        raise NotImplementedError

    def holds(self) -> bool:
        """Whether this handle still holds its lock (not released, not lost)."""
        return getattr(self, "fd", None) is not None or getattr(self, "token", None) is not None

    def __enter__(self) -> Lock:
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def __del__(self):
        with contextlib.suppress(Exception):
            self.release()


class LocalLock(Lock):
    def __init__(self, folder: str, holder: Holder):
        self.folder, self.pid = folder, os.getpid()
        self.path = os.path.join(os.path.abspath(local_path(folder)), NAME)
        # The folders the lock creates go again on release when nothing else was written into them.
        self.created = _missing(os.path.dirname(self.path))
        self.fd, writable = _flock(self.path)
        self.previous = Holder.parse(os.pread(self.fd, 4096, 0))
        self.reason = "no longer running" if self.previous else None
        if writable:
            os.ftruncate(self.fd, 0)
            os.pwrite(self.fd, holder.dumps(), 0)

    def release(self) -> None:
        fd, self.fd = getattr(self, "fd", None), None
        if fd is None:
            return
        if os.getpid() != self.pid:
            os.close(fd)
            return
        with contextlib.suppress(OSError):  # removed while still locked: the next taker locks a new file
            os.unlink(self.path)
        os.close(fd)
        for folder in self.created:  # deepest first; a folder that holds anything stays
            with contextlib.suppress(OSError):
                os.rmdir(folder)

    def forget(self) -> None:
        """In a forked child: drop this copy of the descriptor, so that only the parent holds the lock
        (a loader worker that outlives a killed trainer must not block its rerun)."""
        fd, self.fd = getattr(self, "fd", None), None
        if fd is not None:
            os.close(fd)


def _missing(folder: str) -> list[str]:
    """`folder` and those of its parents that do not exist, deepest first."""
    missing = []
    while not os.path.lexists(folder) and folder != os.path.dirname(folder):
        missing.append(folder)
        folder = os.path.dirname(folder)
    return missing


def _flock(path: str) -> tuple[int, bool]:
    """A descriptor of `path` holding an exclusive flock, and whether it may be written. Busy when held."""
    for attempt in range(100):  # a holder may release (and remove the file, its folder) meanwhile
        os.makedirs(os.path.dirname(path), exist_ok=True)
        try:
            fd, writable = os.open(path, os.O_RDWR | os.O_CREAT, 0o666), True
        except FileNotFoundError:
            if attempt == 99:
                raise
            continue
        except PermissionError:
            if not os.path.isfile(path):
                raise
            fd, writable = os.open(path, os.O_RDONLY), False  # another user's lock file: flock still works
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            holder = Holder.parse(os.pread(fd, 4096, 0))
            os.close(fd)
            if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
            orphaned = holder is not None and holder.host == HOST and not running(holder.pid)
            raise Busy(holder, orphaned) from None
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if same:
            return fd, writable
        os.close(fd)  # its holder released and removed it meanwhile: lock the file that is there now
    raise OSError(errno.EAGAIN, "the lock file kept changing", path)


class ObjectLock(Lock):
    def __init__(self, folder: str, holder: Holder, what: str, client: Any = None):
        self.folder, self.pid, self.holder, self.what = folder, os.getpid(), holder, what
        self.path = join(folder, NAME)
        self.objects = cas.objects_for(self.path, client)
        self.token, self.lost = None, False
        self._mutex, self._stop = threading.Lock(), threading.Event()
        for _ in range(20):
            data, token = self.objects.read(self.path)
            previous = reason = None
            if data is not None:
                previous = Holder.parse(data)
                reason = previous.gone() if previous else "its lock object does not parse"
                if reason is None:
                    raise Busy(previous)
            holder.renewed = time.time()
            self.token = self.objects.write_if(self.path, holder.dumps(), token)
            if self.token is not None:
                break
        else:
            raise Busy(Holder.parse(self.objects.read(self.path)[0]))
        self.previous, self.reason = previous, reason
        interval_s = holder.lease_s / 3  # renewed three times per lease: two renewals may fail
        args = (weakref.ref(self), self._stop, interval_s)
        threading.Thread(target=_renew_loop, args=args, daemon=True, name=f"lease {self.path}").start()

    def renew(self) -> bool:
        """Rewrite the object under the generation written last; False once it is no longer ours."""
        with self._mutex:
            if self.token is None:
                return False
            self.holder.renewed = time.time()
            try:
                token = self.objects.write_if(self.path, self.holder.dumps(), self.token)
            except Exception:  # a network error: the next renewal tries again, within the lease
                return True
            if token is None:
                self.token, self.lost = None, True
                who = Holder.parse(self.objects.read(self.path)[0])
                _say(
                    f"warning: {self.what} {self.folder}: this run lost its lock "
                    f"to {f'pid {who.pid} on {who.host}' if who else 'another process'}, which found it "
                    f"not renewed within {self.holder.lease_s:.0f} s; both may now write there: stop one"
                )
                return False
            self.token = token
            return True

    def release(self) -> None:
        self._stop.set()
        with self._mutex:
            token, self.token = self.token, None
        if token is not None and os.getpid() == self.pid:
            with contextlib.suppress(Exception):  # left behind: taken over at its lease's end
                self.objects.delete_if(self.path, token)

    def __del__(self):
        # Garbage collection runs in whatever thread allocates at the time, an event loop's included
        # (gcsfs's): never block it on a request. The release goes to a thread of its own.
        if getattr(self, "token", None) is None:
            return
        with contextlib.suppress(Exception):  # at interpreter shutdown: _release_all has run
            threading.Thread(target=self.release, daemon=True, name=f"release {self.path}").start()


def _renew_loop(ref: weakref.ref, stop: threading.Event, interval_s: float) -> None:
    while not stop.wait(interval_s):
        held = ref()
        if held is None or not held.renew():
            return
        del held


class _Borrowed(Lock):
    """A lock an enclosing scope holds: releasing this handle leaves it to that scope."""

    def __init__(self, held: Lock):
        self.folder, self.held = held.folder, held

    def release(self) -> None:
        pass


# ----------------------------------------------------------------------------------------- scopes

_scopes: contextvars.ContextVar[tuple[list[Lock], ...]] = contextvars.ContextVar("albert_locks", default=())
_live: weakref.WeakSet[Lock] = weakref.WeakSet()


@contextlib.contextmanager
def scope() -> Iterator[None]:
    """Hold the locks taken inside until the block (or the decorated function) ends."""
    held: list[Lock] = []
    token = _scopes.set((*_scopes.get(), held))
    try:
        yield
    finally:
        _scopes.reset(token)
        for one in reversed(held):
            one.release()


def _key(folder: str) -> str:
    return folder.rstrip("/") if is_url(folder) else os.path.realpath(local_path(folder))


def take(
    folder: str, stage: str, *, what: str = "--out", lease_s: float = LEASE_S, client: Any = None
) -> Lock:
    """Lock `folder` for `stage` (raises Busy, or an OSError of the folder); held until the innermost
    scope ends. A holder that died is taken over with a line on stderr. `what`: how the user names
    the folder (for that line); `client`: the GCS client of a gs:// folder (default: a new one)."""
    key = _key(folder)
    for held in (one for level in _scopes.get() for one in level):
        if held.key == key and held.holds():
            return _Borrowed(held)
    if is_url(folder):
        lock: Lock = ObjectLock(folder, Holder.me(stage, lease_s), what, client)
    else:
        lock = LocalLock(folder, Holder.me(stage))
    lock.key = key
    if lock.previous:
        previous = lock.previous
        _say(
            f"warning: {what} {folder}: taking over the lock of pid {previous.pid} on {previous.host} ({lock.reason})"
        )
    levels = _scopes.get()
    if levels:
        levels[-1].append(lock)
    _live.add(lock)
    return lock


def _forget_in_child() -> None:
    for held in list(_live):
        if isinstance(held, LocalLock):
            held.forget()


@atexit.register
def _release_all() -> None:
    for held in list(_live):
        held.release()


os.register_at_fork(after_in_child=_forget_in_child)

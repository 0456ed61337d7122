"""A Beam run that fails removes what it wrote, and fails in one line.

`albert corpus` and `albert instances` write temporaries (the corpus' spill files and pieces under
`_tmp/`) and partial outputs while Beam runs. `cleaned_on_failure` wraps the run: when it fails (a full
disk, a read-only file system, SIGTERM, Ctrl-C, a bug) the run's own files are removed before the error
goes on, so a failed run neither keeps the disk full nor leaves half an output that a glob could take
for a whole one. The caller names the files (patterns inside `--out`); the stage removed every earlier
file of those kinds before the run, so whatever matches them now, this run wrote.

It also undoes what Beam does to an error on its way to the launcher:

- A worker's OSError arrives as a RuntimeError: as text from a worker process (`OSError: [Errno 28] No
  space left on device: 'PATH' [while running 'Step']`), or with the OSError as its context when the
  worker runs in this process. The OSError itself is raised again (core.oserrors.find), so
  that `albert` prints its one line and Python callers (the flows) can catch an OSError.
- A request to a store that failed for good (core.errors.StorageFailed, after its retries) is raised
  again as itself: from a worker process it arrives as the text of its traceback, whose last line
  is its one line.
- SIGTERM's Interrupted or Ctrl-C's KeyboardInterrupt, raised inside a step that runs in this
  process, comes out of Beam as `RuntimeError('Interrupted: ... [while running ...]')`: raised again as
  itself (exit 143 or 130, one line).
- Beam logs a failing step's traceback (ERROR records of its `apache_beam` loggers) before it raises,
  and a worker process prints it to the stderr it shares with the launcher. Both are held (the log
  records while the run lasts; what reaches file descriptor 2 from the first traceback on), and
  printed only when the failure is neither an OS error nor an interrupt: a bug keeps every word Beam
  said about it. Everything else on stderr (Beam's warnings) goes through as it comes.

The local runner's worker processes (`--direct_running_mode multi_processing`) are stopped by the
runner itself before the error leaves it (its worker handlers close in a `finally`), so no worker
writes into a folder being removed; tests/test_trust_faults_cli.py checks that none is left.
"""

from __future__ import annotations

import codecs
import contextlib
import logging
import os
import re
import signal
import sys
import threading
from collections.abc import Iterator, Sequence

from core import oserrors, storage
from core.errors import Interrupted, StorageFailed

_log = logging.getLogger(__name__)

# Beam's local runner logs what its worker processes log as the protobuf text of each LogEntry
# (`Worker: severity: WARN timestamp { seconds: ... } message: "\345\244..." log_location: ...`).
_WORKER_LOGGER = "apache_beam.runners.portability.local_job_service"
_PROTO_FIELD = r'{} *: *"((?:[^"\\]|\\.)*)"'


def _proto_string(text: str, field: str) -> str | None:
    """A string field of protobuf text format, unescaped (octal escapes are bytes of UTF-8), or None."""
    found = re.search(_PROTO_FIELD.format(field), text)
    if found is None:
        return None
    return codecs.escape_decode(found.group(1).encode("utf-8"))[0].decode("utf-8", "replace")


class WorkerLogLines(logging.Filter):
    """Rewrites a worker's log record as plain text: `beam worker: MESSAGE (file.py:LINE)`, at the level
    Beam gave it (a message of several lines, a traceback, keeps them). Installed on Beam's job-service
    logger when this module is imported."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg == "Worker: %s" and record.args and isinstance(record.args[0], str):
            text = record.args[0]
            message = _proto_string(text, "message")
            if message is not None:
                where = _proto_string(text, "log_location")
                record.msg, record.args = "beam worker: %s%s", (message, f" ({where})" if where else "")
        return True


logging.getLogger(_WORKER_LOGGER).addFilter(WorkerLogLines())


@contextlib.contextmanager
def cleaned_on_failure(out_dir: str, own: Sequence[str]) -> Iterator[None]:
    """Run the block (a Beam run writing into `out_dir`); if it raises, remove `own` (names or glob
    patterns inside `out_dir`: folders go whole) and raise the error as described above."""
    held = _HeldOutput()
    try:
        with held:
            yield
    except BaseException as err:
        with _signals_deferred():  # a second SIGTERM must not cut the clean-up short
            remove_own(out_dir, own)
        interrupt = _interrupt_in(err)
        if interrupt is not None:
            raise interrupt from None
        failed = _storage_failure_in(err)
        if failed is not None:
            raise failed from None
        found = oserrors.find(err) if isinstance(err, Exception) else None
        if found is None:
            held.show()
            raise
        if found is err:
            raise
        raise found from None
    held.show()  # a run that succeeded after retries: what Beam said about them


def remove_own(out_dir: str, own: Sequence[str]) -> None:
    """Remove the files and folders that `own` names inside `out_dir`. Best effort: a removal that
    fails (the file system went read-only, an I/O error) must not hide the error that says why."""
    for pattern in own:
        path = storage.join(out_dir, pattern)
        paths = storage.glob(path) if storage.has_glob(pattern) else [path]
        for found in paths:
            try:
                storage.remove(found, recursive=True)
            except OSError as err:
                _log.debug("could not remove %s: %s", found, err)


# A worker process's StorageFailed, as its traceback's last line reaches the launcher.
_STORAGE_TEXT = re.compile(
    r"\b(?:core\.errors\.)?(?:StorageFailed|InputChanged): (.+?)(?: \[while running [^\]]*\])*$", re.M
)


def _storage_failure_in(err: BaseException) -> StorageFailed | None:
    """The StorageFailed that `err` is or wraps (in this process), or that a worker process raised
    (in the text Beam hands on)."""
    seen: list[BaseException] = []
    current: BaseException | None = err
    while current is not None and not any(current is earlier for earlier in seen):
        if isinstance(current, StorageFailed):
            return current
        seen.append(current)
        current = current.__cause__ or current.__context__
    for error in seen:
        if match := _STORAGE_TEXT.search(str(error)):
            return StorageFailed("", "", match.group(1).strip())
    return None


def _interrupt_in(err: BaseException) -> BaseException | None:
    """The Interrupted or KeyboardInterrupt that `err` is, or that Beam wrapped into it."""
    seen: list[BaseException] = []
    current: BaseException | None = err
    while current is not None and not any(current is earlier for earlier in seen):
        if isinstance(current, Interrupted | KeyboardInterrupt):
            return current
        seen.append(current)
        current = current.__cause__ or current.__context__
    return None


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    """SIGTERM and SIGINT wait (blocked, then delivered) while the block runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    blocked = {signal.SIGTERM, signal.SIGINT}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


class _HeldBeamErrors(logging.Handler):
    """While active: ERROR records of the `apache_beam` loggers are held back, the rest go on to the
    root logger's handlers as before. `show` prints the held ones. (Not `release`: that is the
    Handler's lock, which `handle` releases after every record.)"""

    def __init__(self):
        super().__init__(logging.NOTSET)
        self.held: list[logging.LogRecord] = []
        self._logger = logging.getLogger("apache_beam")

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR:
            self.held.append(record)
        else:
            logging.getLogger().handle(record)

    def __enter__(self) -> _HeldBeamErrors:
        self._propagate = self._logger.propagate
        self._logger.addHandler(self)
        self._logger.propagate = False
        return self

    def __exit__(self, *exc) -> None:
        self._logger.removeHandler(self)
        self._logger.propagate = self._propagate

    def show(self) -> None:
        for record in self.held:
            logging.getLogger().handle(record)
        self.held = []


class _HeldStderr:
    """While active, file descriptor 2 (this process's and its children's stderr) is a pipe, pumped to
    the real stderr line by line; from the first line that starts a Python traceback on (or the line
    before one that a thread's uncaught error prints), lines are held instead. `show` prints the held
    lines. Only in the main thread, where a command runs: a stage run as a task of a flow shares the
    descriptor with the rest of the process (Prefect's own logs), whose lines are not ours to hold.
    Nothing happens where descriptor 2 is closed."""

    TRACEBACK = (b"Traceback (most recent call last):", b"Exception in thread ")

    def __init__(self):
        self.held: list[bytes] = []
        self._saved: int | None = None
        self._pump: threading.Thread | None = None

    def __enter__(self) -> _HeldStderr:
        if threading.current_thread() is not threading.main_thread() or sys.stderr is None:
            return self
        sys.stderr.flush()
        try:
            self._saved = os.dup(2)
        except OSError:
            return self
        read, write = os.pipe()
        os.dup2(write, 2)
        os.close(write)
        self._pump = threading.Thread(target=self._forward, args=(read,), name="albert-stderr", daemon=True)
        self._pump.start()
        return self

    def _forward(self, read: int) -> None:
        holding = False
        with contextlib.suppress(OSError), os.fdopen(read, "rb") as pipe:
            for line in pipe:
                holding = holding or line.startswith(self.TRACEBACK)
                if holding:
                    self.held.append(line)
                else:
                    _write_all(self._saved, line)

    def __exit__(self, *exc) -> None:
        if self._saved is None:
            return
        sys.stderr.flush()
        os.dup2(self._saved, 2)  # closes the pipe's end at 2: the pump reads to its end and stops
        # A worker process still holding the pipe would keep it open: wait a little, not forever.
        self._pump.join(timeout=5)
        if not self._pump.is_alive():
            os.close(self._saved)

    def show(self) -> None:
        for line in self.held:
            _write_all(2, line)
        self.held = []


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data) :]


class _HeldOutput:
    """What Beam prints about a failure, held while a run lasts: its log records (_HeldBeamErrors) and
    what its processes write to stderr (_HeldStderr). `show` prints both."""

    def __init__(self):
        self.logs, self.stderr = _HeldBeamErrors(), _HeldStderr()

    def __enter__(self) -> _HeldOutput:
        self.logs.__enter__()
        self.stderr.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.stderr.__exit__(*exc)
        self.logs.__exit__(*exc)

    def show(self) -> None:
        self.stderr.show()
        self.logs.show()

"""The one line of an OS error (core.oserrors): each common cause named, and the OSError found
again where a library handed it on wrapped, as Beam and safetensors do (the CLI tests meet them for
real: tests/faults/)."""

from __future__ import annotations

import errno
import os

import pytest

from core import oserrors, storage


def wrapped(err: BaseException) -> RuntimeError:
    """A RuntimeError raised while handling `err` (its __context__), as Beam's in-process runner does."""
    try:
        raise err
    except BaseException:
        try:
            raise RuntimeError("OSError [while running 'Step']")  # noqa: B904 -- the chain under test
        except RuntimeError as outer:
            return outer


@pytest.mark.parametrize(
    "err, code, path",
    [
        (OSError(errno.ENOSPC, "No space left on device", "/out/a"), errno.ENOSPC, "/out/a"),
        (wrapped(OSError(errno.EIO, "Input/output error")), errno.EIO, None),
        # A worker process's error, as text (Beam's DirectRunner in multi_processing mode):
        (
            RuntimeError(
                "Traceback ...\nRuntimeError: OSError: [Errno 28] No space left on device: "
                "'/out/_tmp/spill/a b.jsonl' [while running 'CleanDocuments/Clean']"
            ),
            errno.ENOSPC,
            "/out/_tmp/spill/a b.jsonl",
        ),
        (RuntimeError("OSError: [Errno 30] Read-only file system [while running 'X']"), errno.EROFS, None),
        # safetensors (Rust):
        (Exception("Error while serializing: I/O error: No space left on device (os error 28)"), 28, None),
    ],
)
def test_find_recovers_the_os_error(err, code, path):
    found = oserrors.find(err)
    assert isinstance(found, OSError) and found.errno == code and found.filename == path


def test_an_error_without_an_errno_is_a_bug_not_an_os_error():
    assert oserrors.find(wrapped(ValueError("bad value 28"))) is None
    assert oserrors.find(RuntimeError("Errno 28 without brackets")) is None


def test_each_cause_is_named(tmp_path):
    out = str(tmp_path / "out" / "spm.model")
    full = oserrors.describe(OSError(errno.ENOSPC, "x", out))
    assert full.startswith(f"no space left on device writing {out} (") and "MB free); free space" in full
    assert "read-only file system: cannot write /a" in oserrors.describe(OSError(errno.EROFS, "x", "/a"))
    assert "permission denied writing /a" in oserrors.describe(OSError(errno.EACCES, "x", "/a"))
    assert "symlink loop at /a" in oserrors.describe(OSError(errno.ELOOP, "x", "/a"))
    assert "I/O error writing /a" in oserrors.describe(OSError(errno.EIO, "x", "/a"))


def test_a_write_under_a_symlink_loop_names_the_loop(tmp_path):
    """os.makedirs says "File exists" at a symlink loop; storage says what it is, and where."""
    folder = tmp_path / "out"
    folder.mkdir()
    loop = folder / "loop"
    os.symlink("loop", loop)
    with pytest.raises(OSError) as caught:
        storage.write_bytes(str(loop / "a.bin"), b"data")  # under a symlink loop: ELOOP
    assert caught.value.errno == errno.ELOOP and caught.value.filename == str(loop)  # the link itself
    assert os.listdir(folder) == ["loop"]

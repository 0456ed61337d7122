"""Run the real `albert` command in a subprocess and check what a user sees: the exit code, ONE line on
stderr naming the problem (never a traceback), and what is left on disk.

    r = albert("pretrain", "--instances", d, "--out", out)
    r.fails(2, "not the vocabulary")      # exit code 2, one error line containing the fragment
    assert tree(out) == before            # nothing of the user's changed
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass
class Result:
    args: tuple[str, ...]
    code: int
    out: str
    err: str

    def error_lines(self) -> list[str]:
        """stderr lines that are ours (`albert CMD: ...`) or look like a failure (Traceback, Error)."""
        return [line for line in self.err.splitlines() if line.strip()]

    def fails(self, code: int, *fragments: str) -> str:
        """Assert exit `code` and a one-line `albert CMD: error|failed: ...` message holding every
        fragment (case-insensitive); no traceback anywhere. Returns the line."""
        where = f"albert {' '.join(self.args)}\nexit {self.code}\nstderr:\n{self.err[-3000:]}"
        assert self.code == code, where
        assert "Traceback" not in self.err and "Traceback" not in self.out, where
        ours = [line for line in self.err.splitlines() if line.startswith(f"albert {self.args[0]}: ")]
        assert len(ours) == 1, where
        line = ours[0]
        for fragment in fragments:
            assert fragment.lower() in line.lower(), f"{fragment!r} not in {line!r}\n{where}"
        return line

    def ok(self) -> Result:
        assert self.code == 0, f"albert {' '.join(self.args)}\nexit {self.code}\n{self.err[-4000:]}"
        return self


def albert(
    *args: str,
    cwd: str | None = None,
    env: dict | None = None,
    timeout: int = 600,
    stdin: str | None = None,
    launcher: tuple[str, ...] = ("-m", "flows.cli"),
) -> Result:
    """`albert ARGS...` as a user runs it (python -m flows.cli, from the repository root); `stdin`:
    text fed to it (UTF-8); `launcher`: another entry point (tests/trainer_hooks.py)."""
    full_env = {**os.environ, "PYTHONPATH": ROOT, **(env or {})}
    full_env.pop("PYTEST_CURRENT_TEST", None)
    proc = subprocess.run(
        [sys.executable, *launcher, *args],
        cwd=cwd or ROOT,
        env=full_env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        input=stdin if stdin is not None else "",
        timeout=timeout,
    )
    return Result(tuple(args), proc.returncode, proc.stdout, proc.stderr)


def tree(folder: str) -> dict[str, str]:
    """{relative path: sha256} of every file under `folder` (what is left on disk)."""
    out = {}
    for root, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, folder)] = hashlib.sha256(f.read()).hexdigest()
    return out


def flip_bit(path: str, offset: int | None = None) -> None:
    """Flip one bit of a file in place (the middle byte by default)."""
    with open(path, "r+b") as f:
        data = bytearray(f.read())
        i = len(data) // 2 if offset is None else offset
        data[i] ^= 0x01
        f.seek(0)
        f.write(data)


def truncate(path: str, keep: float = 0.5) -> None:
    """Cut a file to a fraction of its size, as a killed copy leaves it."""
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(int(size * keep))

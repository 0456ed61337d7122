"""pipelines/malloc.py: the arena cap reaches the processes a local run starts."""

import os
import subprocess
import sys

from pipelines import malloc


def test_limit_arenas_sets_the_default_for_child_processes(monkeypatch):
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    malloc.limit_arenas()
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.environ.get('MALLOC_ARENA_MAX'))"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert child.stdout.strip() == str(malloc.ARENAS)


def test_limit_arenas_keeps_the_users_setting(monkeypatch):
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    malloc.limit_arenas()
    assert os.environ["MALLOC_ARENA_MAX"] == "4"

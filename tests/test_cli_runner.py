"""tests/cli.py's `albert(...)` in this process says what the `albert` script in a process of its own
says: the same exit code, the same error line, output written to file descriptors caught; and it leaves
this process as it found it."""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest

from tests.cli import ROOT, albert, run_bounded


def test_in_this_process_and_in_a_process_agree_on_a_refusal(tmp_path):
    args = ("vocab", "--input", str(tmp_path / "missing.txt"), "--out", str(tmp_path / "v"))
    here, there = albert(*args), albert(*args, process=True)
    assert here.code == there.code == 2
    assert here.fails(2, "missing.txt") == there.fails(2, "missing.txt")


def test_argparse_errors_and_help_are_caught_with_their_exit_codes():
    bad = albert("vocab", "--no-such-option")
    assert bad.code == 2 and "albert vocab: error: the following arguments are required" in bad.err
    assert albert("vocab", "--help").ok().out.startswith("usage: albert vocab")


def test_stdin_env_and_what_a_command_changes_are_restored(tmp_path, vocab_dir):
    before = (dict(os.environ), os.getcwd(), signal.getsignal(signal.SIGTERM))
    r = albert("tokenize", "--vocab", vocab_dir, "--pieces", stdin="你好\n", env={"ALBERT_TEST_MARK": "1"},
               cwd=str(tmp_path))  # fmt: skip
    there = albert("tokenize", "--vocab", vocab_dir, "--pieces", stdin="你好\n", process=True)
    assert r.ok().out.strip() and r.out == there.ok().out
    assert (dict(os.environ), os.getcwd(), signal.getsignal(signal.SIGTERM)) == before


def test_what_reaches_file_descriptor_2_directly_is_caught():
    import flows.cli

    original = flows.cli.main

    def main(argv):
        os.write(2, b"written to fd 2\n")
        return 3

    flows.cli.main = main
    try:
        r = albert("vocab")
    finally:
        flows.cli.main = original
    assert r.code == 3 and r.err == "written to fd 2\n"


def test_an_escaping_exception_is_exit_1_with_its_traceback():
    import flows.cli

    original = flows.cli.main

    def main(argv):
        raise ZeroDivisionError("a bug")

    flows.cli.main = main
    try:
        r = albert("vocab")
    finally:
        flows.cli.main = original
    assert r.code == 1 and "Traceback" in r.err and "ZeroDivisionError: a bug" in r.err


def test_a_command_answers_sigusr1_with_its_stacks_and_goes_on(tmp_path, monkeypatch):
    from flows import cli

    called = []
    monkeypatch.setattr(cli, "_stacks_on_sigusr1", lambda: called.append(True))
    albert("vocab", "--input", str(tmp_path / "missing.txt"), "--out", str(tmp_path / "v")).fails(
        2, "missing"
    )
    assert called  # main registers the handler, before any work
    code = (
        "import os, signal, sys, time\n"
        "from flows import cli\n"
        "cli._stacks_on_sigusr1()\n"
        "os.kill(os.getpid(), signal.SIGUSR1)\n"
        "time.sleep(0.2)\n"
        "print('went on')\n"
    )
    done = run_bounded([sys.executable, "-c", code], 120, cwd=ROOT)
    assert done.returncode == 0 and done.stdout == "went on\n"
    assert "Current thread" in done.stderr and 'File "<string>", line 4' in done.stderr


def test_a_timeout_ends_the_whole_tree_and_shows_where_it_hung(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    code = (
        "import subprocess, sys, time\n"
        "from flows import cli\n"
        "cli._stacks_on_sigusr1()\n"
        f"child = subprocess.Popen(['sleep', '600'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(600)\n"
    )
    with pytest.raises(AssertionError, match="still running after 3 s") as failed:
        run_bounded([sys.executable, "-c", code], 3, cwd=ROOT)
    assert 'File "<string>", line 6' in str(failed.value)  # the stack of the hung process
    grandchild = int(pid_file.read_text())
    for _ in range(50):  # killed with its group; reaped by init a moment later
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"process {grandchild} outlived the timeout")

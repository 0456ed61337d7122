"""`albert ui`: the Prefect UI on a demo folder's database, with the UI's API address set (a bare
`prefect server start --port P` leaves the UI talking to port 4200: "Can't connect to Server API")."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from flows.cli import main as albert
from flows.server import free_port
from tests.faults import alive, descendants
from tests.model.train_fixtures import ROOT


def ctrl_c_as_in_a_terminal() -> None:
    """SIGINT's default disposition in the child, as a terminal gives it. A test run started in the
    background of a script (`.ci/run &`) inherits SIGINT ignored, and Python then keeps it ignored:
    the UI would never see the Ctrl-C these tests send."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_ui(tmp_path, port: int, stdout) -> subprocess.Popen:
    """`albert ui` on a demo folder whose Prefect database is an empty SQLite file (the server migrates
    it, as after a demo)."""
    home = tmp_path / "demo" / "prefect-home"
    home.mkdir(parents=True)
    (home / "prefect.db").touch()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    return subprocess.Popen(
        [sys.executable, "-m", "flows.cli", "ui", "--out", str(tmp_path / "demo"), "--port", str(port)],
        cwd=ROOT, env={**env, "PYTHONPATH": ROOT}, stdout=stdout, stderr=subprocess.STDOUT, text=True,
        preexec_fn=ctrl_c_as_in_a_terminal,
    )  # fmt: skip


def test_a_folder_without_a_prefect_database_is_refused(tmp_path, capsys):
    assert albert(["ui", "--out", str(tmp_path)]) == 2
    assert "holds no Prefect database: run `albert demo --out" in capsys.readouterr().err


# Slow: a Prefect server of its own (about 20 s); test_ui_browser (slow too) reads its pages.
@pytest.mark.slow
def test_the_ui_talks_to_its_own_api_on_any_port(tmp_path):
    port = free_port()
    log_path = tmp_path / "ui.log"
    with open(log_path, "w") as log:
        proc = start_ui(tmp_path, port, stdout=log)
    try:
        settings, deadline = None, time.monotonic() + 180
        while settings is None:
            assert proc.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, "the UI did not answer"
            try:
                settings = json.load(
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/ui-settings", timeout=5)
                )
            except OSError:
                time.sleep(1)
        assert settings["api_url"] == f"http://127.0.0.1:{port}/api"
        page = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10).read().decode()
        assert "<html" in page.lower() and "prefect" in page.lower()
        health = urllib.request.urlopen(settings["api_url"] + "/health", timeout=10).read()
        assert json.loads(health) is True
        # The server can answer before `albert ui` has seen it healthy and printed its address.
        while "Ctrl-C stops it." not in log_path.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    out = log_path.read_text()
    assert proc.returncode == 0, out
    assert f"Prefect UI on the runs of {tmp_path / 'demo'}: http://127.0.0.1:{port}" in out


def test_ctrl_c_while_the_server_starts_stops_the_ui_cleanly(tmp_path):
    proc = start_ui(tmp_path, free_port(), stdout=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 180
        # Once the server process exists, `albert ui` is waiting for its health (or just past it).
        while not (server := descendants(proc.pid)):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    assert "Prefect UI stopped." in out and "Traceback" not in out
    assert not alive(server)  # the Prefect server it started is stopped with it

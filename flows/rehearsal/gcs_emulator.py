"""A local GCS for tests and `albert rehearse`: the `gcp-storage-emulator` package's JSON-API server on
127.0.0.1, in memory, as a subprocess.

    with local_gcs() as host:                 # "http://127.0.0.1:PORT", exported as STORAGE_EMULATOR_HOST
        create_bucket(host, "factory")
        ...                                   # gs://factory/... now works in this process and its children

gcsfs (core.storage) and google-cloud-storage (the registry) both find the emulator through
STORAGE_EMULATOR_HOST and use no credentials. Two things an emulator does not do: enforce
`ifGenerationMatch` preconditions (the registry's compare-and-swap keeps its own tests against a strict
fake), and answer gcsfs's gRPC bucket-type probe (core.storage skips it when the variable is set).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

from core.errors import UserError

HOST = "127.0.0.1"


def _free_port() -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _get(url: str, timeout: float = 2.0) -> bytes:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through a proxy
    with opener.open(url, timeout=timeout) as response:
        return response.read()


def create_bucket(host: str, name: str) -> None:
    """Create a bucket on the emulator (no error when it exists)."""
    request = urllib.request.Request(
        f"{host}/storage/v1/b?project=local",
        data=json.dumps({"name": name}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=10) as response:
            response.read()
    except urllib.error.HTTPError as err:
        if err.code != 409:  # 409: the bucket exists
            raise


@contextlib.contextmanager
def local_gcs(port: int | None = None, startup_timeout: float = 60.0, export: bool = True) -> Iterator[str]:
    """Start the emulator; yield its URL. With `export`, STORAGE_EMULATOR_HOST is set for this process
    (and so its children) while it runs, and restored afterwards."""
    port = port or _free_port()
    host = f"http://{HOST}:{port}"
    log = tempfile.NamedTemporaryFile(prefix="gcs-emulator-", suffix=".log", delete=False)
    cmd = [
        sys.executable,
        "-m",
        "gcp_storage_emulator",
        "start",
        f"--host={HOST}",
        f"--port={port}",
        "--in-memory",
    ]
    try:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    except OSError as err:
        raise UserError(f"cannot start the GCS emulator: {err}") from None
    try:
        deadline = time.monotonic() + startup_timeout
        while True:
            try:
                _get(f"{host}/storage/v1/b?project=local")
                break
            except (urllib.error.URLError, OSError):
                if proc.poll() is not None or time.monotonic() > deadline:
                    tail = open(log.name, encoding="utf-8", errors="replace").read()[-500:].strip()
                    if "No module named" in tail:
                        raise UserError("the GCS emulator needs the gcp-storage-emulator package") from None
                    raise UserError(
                        f"the GCS emulator did not start on {host}: {tail or 'no output'}"
                    ) from None
                time.sleep(0.2)
        previous = os.environ.get("STORAGE_EMULATOR_HOST")
        if export:
            os.environ["STORAGE_EMULATOR_HOST"] = host
        try:
            yield host
        finally:
            if export:
                if previous is None:
                    os.environ.pop("STORAGE_EMULATOR_HOST", None)
                else:
                    os.environ["STORAGE_EMULATOR_HOST"] = previous
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
        os.remove(log.name)

"""Beam's portable path on this machine: Beam's Python job server and an external worker pool, where a
Flink or Spark cluster would have its job server and SDK harnesses. `albert rehearse` and the tests
run the corpus and instance stages through it.

    with local_portable(work_dir) as portable:
        albert corpus ... --runner PortableRunner --job_endpoint localhost:P \\
            --environment_type EXTERNAL --environment_config localhost:Q      # portable.flags

Each in its own process group, on free ports, stopped on exit (SIGTERM, then SIGKILL):

- `python -m apache_beam.runners.portability.local_job_service_main --port P --staging_dir DIR`: the
  job service the client submits the pipeline to, and the artifact service it stages files to (the
  worker wheel that `albert corpus` builds for a runner that runs elsewhere lands in DIR);
- `python -m apache_beam.runners.worker.worker_pool_main --service_port Q`: the pool that starts one
  SDK harness process for each worker the job asks for, and runs the pipeline's code there.

The pool starts its workers as `python -c ...`, the `python` of its PATH. A `python` without Beam
dies at once, and the job server then waits for that worker until a gRPC deadline: 303 s of a silent
client, then an error that does not say why. So the pool's PATH begins with a folder whose `python`
runs this interpreter (sys.executable; a script, not a link: a link to a virtualenv's python would
start the base interpreter without the virtualenv), and before the pool starts, that `python` must
import apache_beam and our worker code, or UserError says so.

The workers' code is a worker wheel (pipelines.corpus.staging, the one `albert corpus` stages), put on
the pool's PYTHONPATH as it is (a zip; its working directory is an empty folder): the workers import
core/ and pipelines/ from the wheel, not from the checkout, so a module missing from the wheel fails
here as it would on a cluster. (A Docker SDK container installs staged packages at boot; the external
pool has no boot step, so the wheel the client staged is checked for in DIR instead.)
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from core.errors import UserError
from flows.server import background_process, free_port, log_tail, port_open

STARTUP_SECONDS = 60.0
JOB_SERVER = "apache_beam.runners.portability.local_job_service_main"
WORKER_POOL = "apache_beam.runners.worker.worker_pool_main"


@dataclass(frozen=True)
class Portable:
    """The running services. flags: the Beam flags that send a pipeline to them."""

    job_port: int
    pool_port: int
    staging_dir: str  # the job server's artifact staging: what clients staged
    worker_wheel: str  # what the pool's workers import our code from

    @property
    def flags(self) -> list[str]:
        return [
            "--runner", "PortableRunner",
            "--job_endpoint", f"localhost:{self.job_port}",
            "--environment_type", "EXTERNAL",
            "--environment_config", f"localhost:{self.pool_port}",
        ]  # fmt: skip

    def staged_wheels(self) -> list[str]:
        """The worker wheels the job server received as artifacts, one per job so far (paths; the
        artifact service names a file `<sha256>-<name>`)."""
        return sorted(
            os.path.join(folder, name)
            for folder, _, names in os.walk(self.staging_dir)
            for name in names
            if name.endswith(".whl") and "-albert_pipelines-" in name
        )


def python_shim(folder: str) -> str:
    """A folder whose `python` runs this interpreter with its arguments (for a PATH)."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "python")
    with open(path, "w") as f:
        f.write(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    os.chmod(path, 0o755)
    return folder


def pool_env(work_dir: str, wheel: str) -> dict[str, str]:
    """The worker pool's environment: `python` is this interpreter, our code comes from the wheel."""
    shim = python_shim(os.path.join(work_dir, "bin"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(
        {"PATH": shim + os.pathsep + env.get("PATH", ""), "PYTHONPATH": wheel, "PYTHONUNBUFFERED": "1"}
    )
    return env


def check_worker_python(env: dict[str, str], cwd: str, wheel: str) -> None:
    """The `python` the pool will start imports Beam, and our code from the wheel: UserError otherwise
    (instead of a client that hangs until a gRPC deadline)."""
    code = "import apache_beam, pipelines.corpus.pipeline as p; print(p.__file__)"
    try:
        out = subprocess.run(
            ["python", "-c", code], env=env, cwd=cwd, capture_output=True, text=True, timeout=120
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise UserError(f"the worker pool's `python` did not run: {err}") from None
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise UserError(f"the worker pool's `python` cannot run Beam workers: {last}")
    if not out.stdout.strip().startswith(wheel):
        raise UserError(f"the worker pool's `python` imports our code from {out.stdout.strip()}, not {wheel}")


@contextlib.contextmanager
def _service(name: str, command: list[str], port: int, env: dict, cwd: str, log_path: str) -> Iterator[None]:
    """Run `command` in its own process group (its workers too: all are stopped at the end of the
    block); wait for its port first."""
    with background_process(command, env, cwd, log_path) as proc:
        deadline = time.monotonic() + STARTUP_SECONDS
        while not port_open(port):
            if proc.poll() is not None:
                raise UserError(f"the {name} exited with code {proc.returncode}: {log_tail(log_path)}")
            if time.monotonic() > deadline:
                raise UserError(f"the {name} did not listen on port {port} within {STARTUP_SECONDS:g} s")
            time.sleep(0.2)
        yield


@contextlib.contextmanager
def local_portable(work_dir: str) -> Iterator[Portable]:
    """Start Beam's job server and an external worker pool (logs, staging, the workers' wheel and
    working directory under work_dir); yield them as a Portable; stop both on exit."""
    from pipelines.corpus.staging import build_worker_wheel

    work_dir = os.path.abspath(work_dir)
    staging, cwd = os.path.join(work_dir, "staging"), os.path.join(work_dir, "workers")
    os.makedirs(cwd, exist_ok=True)
    wheel = build_worker_wheel(os.path.join(work_dir, "wheel"))
    env = pool_env(work_dir, wheel)
    check_worker_python(env, cwd, wheel)
    job_port, pool_port = free_port(), free_port()
    while pool_port == job_port:
        pool_port = free_port()
    job = [sys.executable, "-m", JOB_SERVER, "--port", str(job_port), "--staging_dir", staging]
    pool = [sys.executable, "-m", WORKER_POOL, "--service_port", str(pool_port)]
    with (
        _service("job server", job, job_port, os.environ.copy(), work_dir, os.path.join(work_dir, "job.log")),
        _service("worker pool", pool, pool_port, env, cwd, os.path.join(work_dir, "pool.log")),
    ):
        yield Portable(job_port, pool_port, staging, wheel)


def differing_files(a: str, b: str) -> list[str]:
    """The output files of folder a and folder b that are in one only or whose bytes differ; [] when
    both hold the same outputs, byte for byte. Not compared: manifest.json (it records the runner and
    the run time) and hidden files (the folder's marker, core.outdir)."""
    names = {
        n
        for folder in (a, b)
        for n in os.listdir(folder)
        if os.path.isfile(os.path.join(folder, n)) and n != "manifest.json" and not n.startswith(".")
    }
    return sorted(n for n in names if not _same_bytes(os.path.join(a, n), os.path.join(b, n)))


def _read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def _same_bytes(x: str, y: str) -> bool:
    if not (os.path.isfile(x) and os.path.isfile(y)):
        return False
    with open(x, "rb") as f, open(y, "rb") as g:
        return f.read() == g.read()


# --- the rehearsal's step ------------------------------------------------------------------------------


def albert(args: list[str], timeout: float) -> float:
    """Run `albert ARGS` (this interpreter, this checkout) to its end; its wall seconds. UserError with
    its last line of stderr when it fails, and when it runs past `timeout` (a worker that never
    connects holds the client until a gRPC deadline)."""
    started = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "flows.cli", *args],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        raise UserError(f"albert {args[0]} did not finish within {timeout:g} s") from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        raise UserError(f"albert {' '.join(args[:1])} failed: {last}")
    return time.monotonic() - started


def rehearse(
    work_dir: str, say: Callable[[str], None], source: str = "peoples-daily:", timeout: float = 600
) -> bool:
    """`albert corpus`, then `albert vocab` (on the DirectRunner's corpus), then `albert instances`,
    with the DirectRunner, then through the portable services; says the wall times and whether each
    stage's files are the same bytes. True when they are."""
    direct, portable_dir = os.path.join(work_dir, "direct"), os.path.join(work_dir, "portable")
    vocab = os.path.join(work_dir, "vocab")
    times: dict[str, dict[str, float]] = {"DirectRunner": {}, "PortableRunner": {}}

    def stages(out: str, flags: list[str], runner: str) -> None:
        times[runner]["corpus"] = albert(
            ["corpus", "--source", source, "--out", f"{out}/corpus", *flags], timeout
        )
        if not os.path.isdir(vocab):
            albert(["vocab", "--corpus", f"{direct}/corpus", "--out", vocab], timeout)
        args = ["instances", "--corpus", f"{out}/corpus", "--vocab", vocab, "--out", f"{out}/instances"]
        times[runner]["instances"] = albert([*args, *flags], timeout)

    stages(direct, [], "DirectRunner")
    with local_portable(os.path.join(work_dir, "services")) as portable:
        say(f"job server localhost:{portable.job_port} (Beam's Python job service), worker pool "
            f"localhost:{portable.pool_port} (EXTERNAL environment, SDK harness processes of this Python)")  # fmt: skip
        say("  " + " ".join(portable.flags))
        stages(portable_dir, portable.flags, "PortableRunner")
        wheels = [os.path.basename(path).split("-", 1)[1] for path in portable.staged_wheels()]
    say(f"worker wheels staged to the job server: {len(wheels)} ({', '.join(sorted(set(wheels)))})")
    jobs = re.findall(
        r"Completed job in ([0-9.]+) seconds", _read(os.path.join(work_dir, "services", "job.log"))
    )
    say(
        "the job server ran the jobs in "
        + ", ".join(f"{float(s):.1f} s" for s in jobs)
        + " (corpus, instances)"
    )
    same = True
    for stage in ("corpus", "instances"):
        differ = differing_files(os.path.join(direct, stage), os.path.join(portable_dir, stage))
        files = [n for n in os.listdir(os.path.join(direct, stage)) if not n.startswith(".")]
        verdict = "byte-identical" if not differ else "DIFFERENT: " + ", ".join(differ)
        say(f"  {stage:<9}  DirectRunner {times['DirectRunner'][stage]:6.1f} s   PortableRunner "
            f"{times['PortableRunner'][stage]:6.1f} s   {len(files) - 1} files besides manifest.json: {verdict}")  # fmt: skip
        same = same and not differ
    return same and len(wheels) == 2

"""Which Beam runner `--runner` names, and what that runner needs before a run starts.

`albert corpus` and `albert instances` take `--runner` as a short name (`DirectRunner`, `direct`,
`FlinkRunner`, `flink`, `DaskRunner`, ...) or as a full class path
(`apache_beam.runners.dask.dask_runner.DaskRunner`, or a runner of your own):

- `resolve` turns the name into one `Runner` (a UserError names the known ones);
- `import_option_classes` imports the modules that define the known runners' option classes: Beam
  checks flags against the PipelineOptions subclasses imported so far, and Dask's live in its runner's
  module, so `--dask_client_address` was an unknown option until that module was imported;
- `check_can_run` fails in one line, before any work, when the runner lacks what it needs here: a
  Python package, a job server jar and `java`, a binary, a job server that answers.

Nothing here downloads anything. Beam's Flink and Spark runners fetch their job server jar, and its
Prism runner a binary, when none is given; with albert the user gives the file (or a running job
server's --job_endpoint), so the run uses a known jar and fails at once where nothing can be fetched.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
import socket
import urllib.parse
from dataclasses import dataclass

from apache_beam.options.pipeline_options import (
    FlinkRunnerOptions,
    GoogleCloudOptions,
    JobServerOptions,
    KafkaStreamsRunnerOptions,
    PipelineOptions,
    PortableOptions,
    PrismRunnerOptions,
    SparkRunnerOptions,
    StandardOptions,
)

from core.errors import UserError

DASK = "apache_beam.runners.dask.dask_runner.DaskRunner"  # shipped with Beam, missing from its list
KNOWN_PATHS = (*StandardOptions.ALL_KNOWN_RUNNERS, DASK)
# Modules that define the option classes of the runners we document. Dataflow, Flink, Spark, Portable
# and Prism keep theirs in pipeline_options (imported with Beam); Dask's needs the dask package.
OPTION_MODULES = {
    "DataflowRunner": "apache_beam.options.pipeline_options",
    "FlinkRunner": "apache_beam.options.pipeline_options",
    "SparkRunner": "apache_beam.options.pipeline_options",
    "PortableRunner": "apache_beam.options.pipeline_options",
    "PrismRunner": "apache_beam.options.pipeline_options",
    "DaskRunner": "apache_beam.runners.dask.dask_runner",
}
# Python packages a runner imports beyond Beam's own, and how to get them.
PACKAGES = {
    "DaskRunner": (("dask", "distributed"), "pip install 'apache-beam[dask]'"),
    "DataflowRunner": (("google.cloud", "apitools"), "pip install 'apache-beam[gcp]'"),
}
# Beam's local runners that run the pipeline in this process and its children (Prism, also "local" to
# Beam, runs a binary of its own).
IN_PROCESS = tuple(name for name in StandardOptions.LOCAL_RUNNERS if name != "PrismRunner")
CONNECT_SECONDS = 3.0  # to see whether a job server answers (Beam itself would wait 300 s)


@dataclass(frozen=True)
class Runner:
    """One Beam runner. name: its class name ("FlinkRunner"); path: its full class path."""

    name: str
    path: str

    @property
    def flag(self) -> str:
        """What `--runner` hands Beam: the class name where Beam knows it by that name, else the path."""
        return self.name if self.path in StandardOptions.ALL_KNOWN_RUNNERS else self.path

    @property
    def local(self) -> bool:
        """Runs in this process and its children: workers read the code from here, nothing is staged."""
        return self.name in IN_PROCESS and self.path.startswith("apache_beam.")


def resolve(name: str) -> Runner:
    """The runner `--runner NAME` means: a known short name, any case, with or without "Runner"
    ("direct", "flink", "DaskRunner"), or a full class path (module.Class)."""
    by_name = {path.rsplit(".", 1)[1].lower(): path for path in KNOWN_PATHS}
    key = name.strip().lower()
    path = by_name.get(key) or by_name.get(key + "runner")
    if path is None and "." in name:
        path = name.strip()
    if path is None:
        known = ", ".join(sorted(p.rsplit(".", 1)[1] for p in KNOWN_PATHS))
        raise UserError(f"--runner {name}: not a known runner ({known}) nor a full class path (module.Class)")
    return Runner(path.rsplit(".", 1)[1], path)


def load(runner: Runner) -> type:
    """The runner's class, imported: one line naming the package when it is missing, or the module
    or class when the path is wrong."""
    from apache_beam.runners.runner import PipelineRunner

    missing = [p for p in PACKAGES.get(runner.name, ((), ""))[0] if not _installed(p)]
    if missing:
        how = PACKAGES[runner.name][1]
        raise UserError(f"{runner.name} needs the Python package(s) {', '.join(missing)} ({how})")
    module_name, class_name = runner.path.rsplit(".", 1)
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise UserError(f"--runner {runner.path}: cannot import {module_name} ({err})") from None
    cls = getattr(module, class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, PipelineRunner)):
        raise UserError(f"--runner {runner.path}: {module_name} has no Beam runner class {class_name}")
    return cls


def _installed(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except ImportError:  # a parent package missing
        return False


def import_option_classes() -> None:
    """Import the modules of the known runners' option classes whose packages are installed (a
    runner whose package is missing is refused by `load`, in one line, when it is chosen)."""
    for name, module in OPTION_MODULES.items():
        if all(_installed(p) for p in PACKAGES.get(name, ((), ""))[0]):
            try:
                importlib.import_module(module)
            except ImportError:  # installed but broken: `load` says so if this runner is chosen
                continue


# --- what a runner needs ------------------------------------------------------------------------------


def check_can_run(runner: Runner, flags: list[str]) -> None:
    """UserError, in one line, when `runner` with these Beam flags cannot start here. Checks only
    what can be seen without starting anything: flags given, files and binaries present, endpoints
    that accept a connection."""
    options = PipelineOptions(flags)
    job_endpoint = options.view_as(PortableOptions).job_endpoint
    if runner.name == "DataflowRunner":
        gcp = options.view_as(GoogleCloudOptions)
        missing = [f"--{name}" for name in ("project", "region", "temp_location") if not getattr(gcp, name)]
        if missing:
            raise UserError(f"DataflowRunner needs {' '.join(missing)} (see infra/dataflow/README.md)")
    elif runner.name == "PortableRunner":
        if not job_endpoint:
            raise UserError(
                "PortableRunner needs --job_endpoint HOST:PORT of a running job server (Flink's, Spark's, "
                "or Beam's own: python -m apache_beam.runners.portability.local_job_service_main --port PORT)"
            )
    elif runner.name == "FlinkRunner" and not job_endpoint:
        flink = options.view_as(FlinkRunnerOptions)
        jar = _beam_jar(f":runners:flink:{flink.flink_version}:job-server:shadowJar")
        java = not flink.flink_submit_uber_jar  # an uber jar goes to Flink's REST API, not to java
        _check_jar(runner, "--flink_job_server_jar", flink.flink_job_server_jar, jar, options, java)
    elif runner.name == "SparkRunner" and not job_endpoint:
        spark = options.view_as(SparkRunnerOptions)
        if spark.spark_submit_uber_jar and not spark.spark_rest_url:
            raise UserError("SparkRunner --spark_submit_uber_jar needs --spark_rest_url http://HOST:6066")
        jar = _beam_jar(f":runners:spark:{spark.spark_version}:job-server:shadowJar")
        java = not spark.spark_submit_uber_jar  # an uber jar goes to Spark's REST API, not to java
        _check_jar(runner, "--spark_job_server_jar", spark.spark_job_server_jar, jar, options, java)
    elif runner.name == "KafkaStreamsRunner" and not job_endpoint:
        jar = options.view_as(KafkaStreamsRunnerOptions).kafka_streams_job_server_jar
        what = "a Kafka Streams job server jar, built from Beam's sources (no release ships one)"
        _check_jar(runner, "--kafka_streams_job_server_jar", jar, what, options)
    elif runner.name == "PrismRunner" and not job_endpoint:
        location = options.view_as(PrismRunnerOptions).prism_location
        if not location:
            raise UserError(
                "PrismRunner needs its binary: --prism_location PATH (the prism executable or its zip "
                "from Beam's release), or --job_endpoint HOST:PORT of a running Prism"
            )
        _check_file("--prism_location", location)
    elif runner.name == "DaskRunner":
        from apache_beam.runners.dask.dask_runner import DaskOptions  # importable: load() checked

        dask = options.view_as(DaskOptions)
        if dask.address:  # --dask_client_address: a scheduler, which must answer (else a local cluster)
            _check_answers("--dask_client_address", dask.address.split("://", 1)[-1])
        if dask.scheduler_file:
            _check_file("--dask_scheduler_file", dask.scheduler_file)
    if job_endpoint and job_endpoint != "embed":
        _check_answers("--job_endpoint", job_endpoint)


def _check_jar(
    runner: Runner, flag: str, given: str | None, jar: str, options: PipelineOptions, java: bool = True
) -> None:
    """A job server jar given (a file here, or a URL the user chose), and java to start it."""
    if not given:
        raise UserError(
            f"{runner.name} needs a job server: {flag} PATH of {jar} (started with java), or "
            f"--job_endpoint HOST:PORT of one that runs; albert does not let Beam download the jar"
        )
    _check_file(flag, given)
    launcher = options.view_as(JobServerOptions).job_server_java_launcher
    if java and not shutil.which(launcher):
        raise UserError(
            f"{runner.name} starts its job server jar with {launcher!r}, which is not on PATH: install a "
            f"Java runtime (or give --job_server_java_launcher PATH)"
        )


def _check_file(flag: str, value: str) -> None:
    """A local path must exist; a URL (scheme://...) is the user's explicit choice and goes as it is."""
    if not urllib.parse.urlparse(value).scheme and not os.path.isfile(value):
        raise UserError(f"{flag} {value}: no such file")


def _check_answers(flag: str, address: str) -> None:
    """Something accepts TCP connections at HOST:PORT (Beam would otherwise wait --job_server_timeout,
    300 s, before failing with a gRPC deadline)."""
    host, _, port = address.rpartition(":")
    host = host.removeprefix("[").removesuffix("]") or "localhost"
    if not port.isdigit():
        raise UserError(f"{flag} {address}: expected HOST:PORT")
    try:
        with socket.create_connection((host, int(port)), timeout=CONNECT_SECONDS):
            pass
    except OSError as err:
        raise UserError(f"{flag} {address}: nothing answers there ({err.strerror or err})") from None


def _beam_jar(gradle_target: str) -> str:
    """The file name of the job server jar Beam would fetch for this target (nothing is fetched)."""
    from apache_beam.utils.subprocess_server import JavaJarServer

    return os.path.basename(JavaJarServer.path_to_beam_jar(gradle_target))

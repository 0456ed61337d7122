"""`--runner` by short name or class path (pipelines/runners.py): the known runners' option classes are
imported before flags are checked, and a runner that cannot run here fails in one line that says what
it needs, before any work."""

from __future__ import annotations

import importlib.util
import socket
import sys

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions, SetupOptions, StandardOptions
from apache_beam.testing.util import assert_that, equal_to

from core.errors import UserError
from pipelines import runners
from pipelines.corpus.stage import beam_flags, check_runner_flags
from tests.cli import albert

DASK_INSTALLED = all(importlib.util.find_spec(p) for p in ("dask", "distributed"))


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("DirectRunner", "DirectRunner"),
        ("direct", "DirectRunner"),
        ("flink", "FlinkRunner"),
        ("SPARKRUNNER", "SparkRunner"),
        ("DaskRunner", "DaskRunner"),
        ("dask", "DaskRunner"),
        ("apache_beam.runners.portability.fn_api_runner.FnApiRunner", "FnApiRunner"),
    ],
)
def test_short_names_and_class_paths(name, expected):
    assert runners.resolve(name).name == expected


def test_beam_gets_the_class_name_or_the_path():
    """Beam knows DirectRunner by name; DaskRunner it knows only by its class path."""
    assert runners.resolve("direct").flag == "DirectRunner"
    assert runners.resolve("DaskRunner").flag == runners.DASK
    path = "apache_beam.runners.direct.direct_runner.DirectRunner"
    assert runners.resolve(path).flag == "DirectRunner"
    # The DirectRunner's local defaults follow the runner, however it is named.
    for name in ("direct", path):
        flags = beam_flags(name, [])
        assert PipelineOptions(flags).view_as(StandardOptions).runner == "DirectRunner"
        assert "--direct_running_mode" in flags


def test_a_runner_by_class_path_runs():
    flags = beam_flags("apache_beam.runners.portability.fn_api_runner.FnApiRunner", [])
    assert PipelineOptions(flags).view_as(SetupOptions).extra_packages is None  # local: nothing staged
    with beam.Pipeline(options=PipelineOptions(flags)) as p:
        assert_that(p | beam.Create([1, 2, 3]) | beam.Map(lambda x: x * x), equal_to([1, 4, 9]))
    assert type(p.runner).__name__ == "FnApiRunner"


def test_unknown_runner_is_one_line_before_any_work(tmp_path):
    out = tmp_path / "out"
    albert("corpus", "--source", "peoples-daily:", "--out", str(out), "--runner", "NoSuchRunner").fails(
        2, "--runner NoSuchRunner", "not a known runner", "FlinkRunner", "DaskRunner"
    )
    assert not out.exists()
    with pytest.raises(UserError, match="cannot import no.such.module"):
        beam_flags("no.such.module.Runner", [])
    with pytest.raises(UserError, match="no Beam runner class Pipeline"):
        beam_flags("apache_beam.pipeline.Pipeline", [])


def test_dask_flags_are_known():
    """Dask's option class lives in its runner's module: imported before the flags are checked. With
    dask missing, the one line names the packages (not `unknown option --dask_client_address`)."""
    with socket.socket() as scheduler:  # where a Dask scheduler listens
        scheduler.bind(("127.0.0.1", 0))
        scheduler.listen()
        address = f"tcp://127.0.0.1:{scheduler.getsockname()[1]}"
        flags = ["--dask_client_address", address, "--dask_npartitions", "8"]
        if DASK_INSTALLED:
            from apache_beam.runners.dask.dask_runner import DaskOptions

            options = PipelineOptions(beam_flags("DaskRunner", flags)).view_as(DaskOptions)
            assert (options.address, options.npartitions) == (address, 8)
    if DASK_INSTALLED:  # the scheduler gone: refused before any work
        with pytest.raises(UserError, match="--dask_client_address 127.0.0.1:.*: nothing answers there"):
            check_runner_flags("DaskRunner", flags)
    else:
        with pytest.raises(UserError, match=r"^DaskRunner needs the Python package\(s\) dask, distributed"):
            check_runner_flags("DaskRunner", flags)


def test_flink_without_a_job_server_says_what_it_needs(tmp_path):
    """Beam would download the job server jar (there is no network for that here): refused in one line
    naming the jar and the flags, before any work; the CLI leaves nothing behind."""
    out = tmp_path / "out"
    line = albert(
        "corpus", "--source", "peoples-daily:", "--out", str(out), "--runner", "FlinkRunner",
        "--flink_master", "localhost:8081", "--flink_version", "1.19",
    ).fails(2, "FlinkRunner needs a job server", "--flink_job_server_jar", "--job_endpoint")  # fmt: skip
    assert f"beam-runners-flink-1.19-job-server-{beam.__version__}.jar" in line
    assert not out.exists()
    with pytest.raises(UserError, match="--flink_job_server_jar /no/such.jar: no such file"):
        check_runner_flags("FlinkRunner", ["--flink_job_server_jar", "/no/such.jar"])
    with pytest.raises(UserError, match="SparkRunner needs a job server: --spark_job_server_jar"):
        check_runner_flags("SparkRunner", ["--spark_master_url", "spark://master:7077"])
    with pytest.raises(
        UserError, match="KafkaStreamsRunner needs a job server: --kafka_streams_job_server_jar"
    ):
        check_runner_flags("KafkaStreamsRunner", [])


def test_a_job_server_jar_needs_java(tmp_path):
    jar = tmp_path / "beam-runners-flink-1.19-job-server.jar"
    jar.write_bytes(b"PK")
    flags = ["--flink_job_server_jar", str(jar)]
    check_runner_flags("FlinkRunner", [*flags, "--job_server_java_launcher", sys.executable])
    with pytest.raises(UserError, match="'no-such-java', which is not on PATH: install a Java runtime"):
        check_runner_flags("FlinkRunner", [*flags, "--job_server_java_launcher", "no-such-java"])
    # An uber jar goes to Flink's REST API: no java here.
    uber = [
        "--flink_submit_uber_jar",
        "--flink_master",
        "flink:8081",
        "--job_server_java_launcher",
        "no-such-java",
    ]
    check_runner_flags("FlinkRunner", [*flags, *uber])


def test_portable_and_prism_need_an_endpoint_or_binary():
    with pytest.raises(UserError, match="PortableRunner needs --job_endpoint HOST:PORT"):
        check_runner_flags("PortableRunner", [])
    with pytest.raises(UserError, match="PrismRunner needs its binary: --prism_location"):
        check_runner_flags("PrismRunner", [])
    with socket.socket() as s:  # a port that nothing listens on (bound, not listening)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        with pytest.raises(UserError, match=f"--job_endpoint localhost:{port}: nothing answers there"):
            check_runner_flags("PortableRunner", ["--job_endpoint", f"localhost:{port}"])
    with socket.socket() as s:  # a job server's port: accepted
        s.bind(("127.0.0.1", 0))
        s.listen()
        endpoint = f"localhost:{s.getsockname()[1]}"
        check_runner_flags("PortableRunner", ["--job_endpoint", endpoint])
        check_runner_flags("FlinkRunner", ["--job_endpoint", endpoint])  # Flink's job server, running

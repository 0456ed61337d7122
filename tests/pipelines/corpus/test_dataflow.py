"""What `albert corpus --runner DataflowRunner ...` hands to Dataflow, checked without contacting GCP:
the PipelineOptions built from the command line, the worker package that would be staged, and the
pipeline graph (serialised to the runner API as the Dataflow client would)."""

from __future__ import annotations

import argparse
import zipfile

import apache_beam as beam
from apache_beam.options.pipeline_options import (
    GoogleCloudOptions,
    PipelineOptions,
    SetupOptions,
    StandardOptions,
    TypeOptions,
)
from apache_beam.portability import common_urns
from apache_beam.runners import pipeline_context
from apache_beam.runners.portability.stager import Stager

from pipelines.corpus import cli
from pipelines.corpus.options import CorpusOptions
from pipelines.corpus.pipeline import build_pipeline
from pipelines.corpus.sources import plan_sources
from pipelines.corpus.stage import beam_flags

DATAFLOW_ARGS = [
    "--runner",
    "DataflowRunner",
    "--project",
    "my-project",
    "--region",
    "europe-west4",
    "--temp_location",
    "gs://my-bucket/tmp",
    "--max_num_workers",
    "50",
]


def _parse(argv):
    parser = argparse.ArgumentParser(prog="albert corpus")
    cli.add_arguments(parser)
    return parser.parse_args(argv)  # exactly what flows/cli.py calls


def test_cli_passes_unknown_options_to_beam():
    args = _parse(
        [
            "--source",
            "peoples-daily:",
            "--out",
            "gs://my-bucket/corpus/v1",
            "--min-chars",
            "80",
            *DATAFLOW_ARGS,
        ]
    )
    assert args.runner == "DataflowRunner" and args.min_chars == 80
    assert args.beam_args == DATAFLOW_ARGS[2:]
    assert cli.options_from_args(args).cleaning.min_chars == 80


def test_dataflow_options_and_staged_worker_package(tmp_path):
    args = _parse(["--source", "peoples-daily:", "--out", "gs://my-bucket/corpus/v1", *DATAFLOW_ARGS])
    flags = beam_flags(args.runner, args.beam_args, staging_dir=str(tmp_path / "wheel"))
    options = PipelineOptions(flags)
    gcp = options.view_as(GoogleCloudOptions)
    assert options.view_as(StandardOptions).runner == "DataflowRunner"
    assert (gcp.project, gcp.region, gcp.temp_location) == (
        "my-project",
        "europe-west4",
        "gs://my-bucket/tmp",
    )
    (wheel,) = options.view_as(SetupOptions).extra_packages
    assert "direct_running_mode" not in " ".join(flags)

    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        meta = zf.read(next(n for n in names if n.endswith("METADATA"))).decode()
    assert {"pipelines/corpus/pipeline.py", "pipelines/corpus/sources.py", "pipelines/documents.py"} <= names
    assert not [n for n in names if n.startswith(("model/", "flows/", "tests/"))]
    requires = [
        line.split(": ", 1)[1].split("==")[0]
        for line in meta.splitlines()
        if line.startswith("Requires-Dist")
    ]
    assert {"opencc", "zhconv", "mwparserfromhell", "xxhash"} <= set(requires)
    assert not {"torch", "tensorflow-cpu", "prefect"} & set(requires)

    # What the Dataflow client would upload: Beam's own stager, run into a local folder.
    (tmp_path / "stage").mkdir()
    resources = Stager.create_job_resources(
        options, str(tmp_path / "stage"), log_submission_env_dependencies=False
    )
    staged = {r.role_payload.decode(errors="ignore") for r in resources}
    assert any(wheel.rsplit("/", 1)[1] in s for s in staged)


def test_image_or_setup_file_replaces_the_wheel(tmp_path):
    flags = beam_flags(
        "DataflowRunner", DATAFLOW_ARGS[2:] + ["--sdk_container_image", "eu.gcr.io/p/albert-worker:1"]
    )
    assert "--extra_package" not in flags
    assert PipelineOptions(flags).view_as(SetupOptions).extra_packages is None


def test_pipeline_graph_serialises_for_a_remote_runner():
    options = PipelineOptions(
        beam_flags("DataflowRunner", DATAFLOW_ARGS[2:] + ["--sdk_container_image", "img"])
    )
    p = beam.Pipeline(runner="DirectRunner", options=options)  # built, never run: no GCP contact
    build_pipeline(p, plan_sources(["peoples-daily:"]), "gs://my-bucket/corpus/v1", CorpusOptions())
    proto = p.to_runner_api()
    labels = {t.unique_name for t in proto.components.transforms.values()}
    for stage in ("ReadSources", "CleanDocuments", "Deduplicate", "WriteDocs", "WriteRejected"):
        assert stage in labels

    # Type inference is off (beam_flags); the keys each GroupByKey shuffles are still encoded by a
    # deterministic coder, which Beam sets at submission whatever the inferred types.
    assert options.view_as(TypeOptions).pipeline_type_check is False
    context = pipeline_context.PipelineContext(proto.components)
    gbk_inputs = [
        proto.components.pcollections[next(iter(t.inputs.values()))]
        for t in proto.components.transforms.values()
        if t.spec.urn == common_urns.primitives.GROUP_BY_KEY.urn
    ]
    assert len(gbk_inputs) > 10
    for pcoll in gbk_inputs:
        assert context.coders.get_by_id(pcoll.coder_id).key_coder().is_deterministic()


def test_type_inference_off_once():
    """Beam's construction-time type inference costs the launcher seconds and decides nothing here:
    off by default, and the user's own --no_pipeline_type_check is not repeated."""
    flags = beam_flags("DirectRunner", [])
    assert PipelineOptions(flags).view_as(TypeOptions).pipeline_type_check is False
    assert beam_flags("DirectRunner", ["--no_pipeline_type_check"]).count("--no_pipeline_type_check") == 1


def test_worker_wheel_installs_and_imports(tmp_path):
    import subprocess
    import sys

    from pipelines.corpus.staging import build_worker_wheel

    wheel = build_worker_wheel(str(tmp_path / "w"))
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            "--target",
            str(target),
            wheel,
        ],
        check=True,
    )
    code = "import pipelines.corpus.pipeline as m; print(m.__file__)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=str(tmp_path),
        env={"PYTHONPATH": str(target)},
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().startswith(str(target))


def test_worker_dockerfile_matches_the_launcher():
    """Dataflow rejects workers whose Beam or Python version differs from the launcher's."""
    import os
    import re
    import sys

    import apache_beam

    path = os.path.join(os.path.dirname(__file__), "..", "..", "..", "infra", "dataflow", "Dockerfile")
    text = open(path).read()
    assert re.search(rf"^ARG BEAM_VERSION={re.escape(apache_beam.__version__)}$", text, re.M)
    assert re.search(rf"^ARG PYTHON_VERSION={sys.version_info.major}\.{sys.version_info.minor}$", text, re.M)
    assert "FROM apache/beam_python${PYTHON_VERSION}_sdk:${BEAM_VERSION}" in text
    assert "albert_pipelines-*.whl" in text  # the same worker wheel the CLI stages
    instructions = "\n".join(line for line in text.splitlines() if not line.startswith("#")).lower()
    for heavy in ("torch", "tensorflow", "prefect", "entrypoint"):
        assert heavy not in instructions


def test_dataflow_without_project_region_or_temp_location_is_a_user_error():
    import pytest

    from core.errors import UserError

    with pytest.raises(UserError, match="--project --region --temp_location"):
        beam_flags("DataflowRunner", ["--sdk_container_image", "img"])


def test_dataflow_out_must_be_a_bucket(tmp_path):
    """Workers write spill files and shards under --out: a path on the launching machine is refused
    before any work (nothing is created there)."""
    import pytest

    from core.errors import UserError
    from pipelines.corpus.stage import run_corpus

    out = tmp_path / "out"
    with pytest.raises(UserError, match="give a bucket"):
        run_corpus(["peoples-daily:"], str(out), runner="DataflowRunner", extra_beam_flags=DATAFLOW_ARGS[2:])
    assert not out.exists()


def test_flink_and_spark_options_as_documented(tmp_path):
    """The options docs/scale.md gives for Flink and Spark (their job server jars, the worker image as
    the SDK harness, or a running job server): accepted, parsed as Beam reads them, and no wheel built
    when an image is given. (The jars are stand-ins: what Beam would start is not checked here; any
    executable stands in for java, whose absence tests/pipelines/test_runners.py checks.)"""
    import socket
    import sys

    from apache_beam.options.pipeline_options import FlinkRunnerOptions, PortableOptions, SparkRunnerOptions

    image = "REGION-docker.pkg.dev/PROJECT/REPO/albert-corpus:TAG"
    harness = ["--environment_type", "DOCKER", "--environment_config", image]
    java = ["--job_server_java_launcher", sys.executable]
    flink_jar, spark_jar = tmp_path / "flink-job-server.jar", tmp_path / "spark-job-server.jar"
    flink_jar.write_bytes(b"PK")
    spark_jar.write_bytes(b"PK")
    flink = PipelineOptions(
        beam_flags(
            "FlinkRunner",
            ["--flink_master", "flink-jobmanager:8081", "--flink_version", "1.19", *harness]
            + ["--flink_job_server_jar", str(flink_jar), *java],
        )
    )
    assert flink.view_as(FlinkRunnerOptions).flink_master == "flink-jobmanager:8081"
    assert flink.view_as(FlinkRunnerOptions).flink_version == "1.19"
    assert flink.view_as(FlinkRunnerOptions).flink_job_server_jar == str(flink_jar)
    spark = PipelineOptions(
        beam_flags(
            "SparkRunner",
            ["--spark_master_url", "spark://spark-master:7077", *harness]
            + ["--spark_job_server_jar", str(spark_jar), *java],
        )
    )
    assert spark.view_as(SparkRunnerOptions).spark_master_url == "spark://spark-master:7077"
    with socket.socket() as job_server:  # something listening where the job server would be
        job_server.bind(("127.0.0.1", 0))
        job_server.listen()
        endpoint = f"localhost:{job_server.getsockname()[1]}"
        portable = PipelineOptions(beam_flags("PortableRunner", ["--job_endpoint", endpoint, *harness]))
    assert portable.view_as(PortableOptions).job_endpoint == endpoint
    for options in (flink, spark, portable):
        assert options.view_as(PortableOptions).environment_type == "DOCKER"
        assert options.view_as(PortableOptions).environment_config == image
        assert options.view_as(SetupOptions).extra_packages is None


def test_an_external_worker_pool_gets_the_wheel(tmp_path):
    """--environment_config is an image only with DOCKER: for an EXTERNAL worker pool it is an address,
    and the workers need the worker wheel staged."""
    import socket

    with socket.socket() as job_server:
        job_server.bind(("127.0.0.1", 0))
        job_server.listen()
        flags = ["--job_endpoint", f"localhost:{job_server.getsockname()[1]}"]
        flags += ["--environment_type", "EXTERNAL", "--environment_config", "localhost:50000"]
        options = PipelineOptions(beam_flags("PortableRunner", flags, staging_dir=str(tmp_path)))
    (wheel,) = options.view_as(SetupOptions).extra_packages
    assert wheel.startswith(str(tmp_path)) and wheel.endswith(".whl")

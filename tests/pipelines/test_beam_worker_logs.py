"""What Beam's local runner relays of its worker processes' logs reaches the user as plain text, not
as the protobuf text of a LogEntry (pipelines/beam_run.py)."""

from __future__ import annotations

import logging

import pipelines.beam_run  # noqa: F401 (installs the filter)


def test_a_worker_warning_is_plain_text_at_its_level(caplog):
    from apache_beam.portability.api import beam_fn_api_pb2
    from apache_beam.runners.portability.local_job_service import BeamFnLoggingServicer

    entry = beam_fn_api_pb2.LogEntry(
        severity=beam_fn_api_pb2.LogEntry.Severity.WARN,
        message='节点 "n1" 的输出\\已丢弃\nsecond line',
        log_location="apache_beam/io/fileio.py:123",
        thread="42",
    )
    bundle = beam_fn_api_pb2.LogEntry.List(log_entries=[entry])
    with caplog.at_level(logging.INFO):
        list(BeamFnLoggingServicer().Logging([bundle]))
    (record,) = [r for r in caplog.records if r.name.endswith("local_job_service")]
    assert record.levelno == logging.WARNING
    assert record.getMessage() == (
        'beam worker: 节点 "n1" 的输出\\已丢弃\nsecond line (apache_beam/io/fileio.py:123)'
    )
    assert "severity" not in record.getMessage() and "timestamp" not in record.getMessage()


def test_other_records_of_that_logger_pass_unchanged(caplog):
    logger = logging.getLogger("apache_beam.runners.portability.local_job_service")
    with caplog.at_level(logging.INFO):
        logger.info("Worker: %s", "no proto fields here")
        logger.info("Starting job %s", "j1")
    assert [r.getMessage() for r in caplog.records] == ["Worker: no proto fields here", "Starting job j1"]

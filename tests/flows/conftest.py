"""One Prefect test server for all flow tests (session scope), with its own PREFECT_HOME and result
storage, so nothing cached by an earlier session (or by `albert demo`) comes back here.

The chain runs on tiny data: 50 articles of the bundled sample as a text file, a ~2k-piece
vocabulary, 64-token instances, a few training steps.
"""

from __future__ import annotations

import os
import tempfile

import pytest

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
_HOME = tempfile.mkdtemp(prefix="albert-flows-prefect-")
os.environ["PREFECT_HOME"] = _HOME
os.environ["PREFECT_LOCAL_STORAGE_PATH"] = os.path.join(_HOME, "storage")

SAMPLE_ARTICLES = 50
TINY = dict(
    corpus_options={"min_chars": 20},
    vocab_size=3000,
    max_seq_length=64,
    max_predictions=10,
    config="tiny",
    steps=4,
    batch_size=8,
)


@pytest.fixture(scope="session", autouse=True)
def prefect_server():
    from prefect.settings import PREFECT_HOME, PREFECT_LOCAL_STORAGE_PATH, temporary_settings
    from prefect.testing.utilities import prefect_test_harness

    with (
        temporary_settings({PREFECT_HOME: _HOME, PREFECT_LOCAL_STORAGE_PATH: os.path.join(_HOME, "storage")}),
        prefect_test_harness(server_startup_timeout=120),
    ):
        yield


@pytest.fixture(scope="session")
def sample_text(tmp_path_factory) -> str:
    """50 articles of the bundled sample in the `text` source format."""
    from pipelines.peoples_daily import read_articles

    path = tmp_path_factory.mktemp("sample") / "sample.txt"
    with open(path, "w", encoding="utf-8") as f:
        for doc in read_articles(limit=SAMPLE_ARTICLES):
            f.write("\n".join(doc["sentences"]) + "\n\n")
    return str(path)


@pytest.fixture(scope="session")
def chain(tmp_path_factory, sample_text) -> dict:
    """One full repretrain run on tiny data; several tests read its outputs."""
    from flows.repretrain import repretrain

    root = str(tmp_path_factory.mktemp("factory"))
    result = repretrain(sources=[f"text:{sample_text}"], storage_root=root, **TINY)
    return {"root": root, "result": result}


def read_artifact(key: str):
    """The latest artifact with this key (None when there is none)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from prefect.client.schemas.sorting import ArtifactSort

    with get_client(sync_client=True) as client:
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])),
            sort=ArtifactSort.CREATED_DESC,
            limit=1,
        )
    return found[0] if found else None


def flow_run_logs(flow_run_id) -> list[str]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    with get_client(sync_client=True) as client:
        logs = client.read_logs(
            log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id])), limit=200
        )
    return [log.message for log in logs]

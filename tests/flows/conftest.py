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


def _post(path: str, body: dict) -> list[dict]:
    """POST a filter to the test server's REST API (a body of exactly these fields)."""
    import asyncio

    from prefect.client.orchestration import get_client

    async def go():
        async with get_client() as client:
            response = await client._client.post(path, json=body)
            response.raise_for_status()
            return response.json()

    return asyncio.run(go())


class Artifact:
    def __init__(self, raw: dict):
        self.key, self.type, self.data, self.flow_run_id = (
            raw["key"],
            raw["type"],
            raw["data"],
            raw["flow_run_id"],
        )
        self.description = raw.get("description") or ""


def read_artifact(key: str) -> Artifact | None:
    """The latest artifact with this key (None when there is none)."""
    found = _post(
        "/artifacts/filter", {"artifacts": {"key": {"any_": [key]}}, "sort": "CREATED_DESC", "limit": 1}
    )
    return Artifact(found[0]) if found else None


def flow_run_logs(flow_run_id) -> list[str]:
    """Messages logged by a flow run and its task runs (oldest first)."""
    body = {"logs": {"flow_run_id": {"any_": [str(flow_run_id)]}}, "sort": "TIMESTAMP_ASC", "limit": 200}
    return [log["message"] for log in _post("/logs/filter", body)]

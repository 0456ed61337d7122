"""Shared fixtures: a slice of the bundled sample and a small vocabulary trained on it (session scope).

Beam runs pinned to the DirectRunner everywhere (never the Prism download: ENVIRONMENT.md)."""

from __future__ import annotations

import os

import pytest

from tests.fake_gcs import fake_gcs  # noqa: F401 (a fixture: the strict GCS client of CAS tests)

pytest_plugins = ["tests.scheduling"]  # how pytest -n shares the tests among its workers

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # One thread per xdist worker (and per process it starts): the workers already share the cores, and
    # torch's default of one thread per core in each would make them fight over every core.
    os.environ.setdefault("OMP_NUM_THREADS", "1")

SAMPLE_DOCS = 240  # enough articles for every invariant, small enough for seconds


@pytest.fixture(scope="session")
def sample_docs() -> list[dict]:
    from pipelines.peoples_daily import read_articles

    return list(read_articles(limit=SAMPLE_DOCS))


@pytest.fixture(scope="session")
def vocab_dir(tmp_path_factory, sample_docs) -> str:
    """A SentencePiece vocabulary (split CJK) trained on the sample slice, plus an English line so the
    Latin side has learned pieces too."""
    from pipelines.vocab import VocabConfig, train_vocab, write_vocab

    out = str(tmp_path_factory.mktemp("vocab"))
    english = [
        "The quick brown fox jumps over the lazy dog.",
        "Hello world, this is ALBERT pretraining.",
    ] * 20
    sentences = [s for d in sample_docs for s in d["sentences"]] + english
    proto, _ = train_vocab(sentences, VocabConfig(vocab_size=3000, sample_sentences=100_000))
    write_vocab(out, proto)
    return out


@pytest.fixture(scope="session")
def tokenizer(vocab_dir):
    from core.tokenizer import Tokenizer

    return Tokenizer.load(vocab_dir)


@pytest.fixture(scope="session")
def gcs():
    """A local GCS (the gcp-storage-emulator package, in memory) for the whole session;
    STORAGE_EMULATOR_HOST points at it while it runs."""
    from flows.rehearsal.gcs_emulator import local_gcs

    with local_gcs() as host:
        yield host


@pytest.fixture
def bucket(gcs) -> str:
    """A new, empty bucket on the local GCS: gs://NAME."""
    import uuid

    from flows.rehearsal.gcs_emulator import create_bucket

    name = f"test-{uuid.uuid4().hex[:12]}"
    create_bucket(gcs, name)
    return f"gs://{name}"

"""Corpus-stage fixtures: inputs of every source kind (with broken records), built once per session."""

from __future__ import annotations

import pytest

from tests.pipelines.corpus.fixtures import make_sources


@pytest.fixture(scope="session")
def corpus_inputs(tmp_path_factory, sample_docs) -> dict:
    return make_sources(str(tmp_path_factory.mktemp("corpus-inputs")), sample_docs)

"""Corpus-stage fixtures: inputs of every source kind (with broken records), built once per session."""

from __future__ import annotations

import pytest

from tests.pipelines.corpus.fixtures import make_sources


@pytest.fixture(scope="session")
def corpus_inputs(tmp_path_factory, sample_docs) -> dict:
    return make_sources(str(tmp_path_factory.mktemp("corpus-inputs")), sample_docs)


@pytest.fixture(scope="session")
def wiki_articles() -> list[dict]:
    """fixtures.PAGES People's Daily articles long enough to be kept, for a dump to damage."""
    from pipelines.peoples_daily import read_articles
    from tests.pipelines.corpus.fixtures import PAGES

    return [a for a in read_articles(limit=700) if sum(len(s) for s in a["sentences"]) > 200][:PAGES]

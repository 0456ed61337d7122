"""Planning the work: `--source` specs, globs, and zhwiki dumps paired with their index."""

from __future__ import annotations

import pytest

from core.errors import UserError
from pipelines.corpus import sources
from tests.pipelines.corpus.fixtures import _pages, write_dump


def test_parse_source():
    assert sources.parse_source("zhwiki:/d/*.bz2") == sources.SourceSpec("zhwiki", "/d/*.bz2")
    assert sources.parse_source("peoples-daily:") == sources.SourceSpec("peoples-daily", "")
    with pytest.raises(UserError):
        sources.parse_source("wikipedia:/x")
    with pytest.raises(UserError):
        sources.parse_source("text:")
    with pytest.raises(UserError):
        sources.plan_sources(["text:/no/such/file-*.txt"])
    with pytest.raises(UserError):
        sources.plan_sources(["peoples-daily:/no/such/199801.txt"])
    assert sources.plan_sources(["peoples-daily:sample"])[0]["path"] == ""


def test_index_given_as_a_source_is_paired_not_read(tmp_path):
    d = tmp_path / "a"
    d.mkdir()
    dump = str(d / "zhwiki-1-pages-articles-multistream.xml.bz2")
    index = write_dump(dump, _pages(5), multistream=True)
    items = sources.plan_sources([f"zhwiki:{d}/*"])
    assert [(i["path"], i["index"]) for i in items] == [(dump, index)]

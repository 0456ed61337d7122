"""pipelines.storage: local paths and fsspec URLs through one set of functions."""

import bz2

import fsspec

from pipelines import storage
from pipelines.corpus import sources
from pipelines.corpus.options import CorpusOptions
from tests.pipelines.corpus.fixtures import page_xml, write_dump


def test_local_match_read_write_rename_delete(tmp_path):
    path = str(tmp_path / "sub" / "a.txt")
    with storage.open_write(path) as f:  # parent folders are created
        f.write(b"hello")
    assert storage.match(str(tmp_path / "sub" / "*.txt")) == [(path, 5)]
    storage.rename(path, path + ".2")
    with storage.open_read(path + ".2") as f:
        f.seek(1)
        assert f.read() == b"ello"
    storage.remove(path + ".2")
    storage.remove(path + ".missing")  # nothing to remove: no error
    assert not storage.exists(path + ".2")


def test_fsspec_url_sources_are_read(tmp_path):
    """memory:// stands for any fsspec filesystem Beam has no native support for."""
    local = str(tmp_path / "zhwiki-1-pages-articles.xml.bz2")
    write_dump(local, [page_xml(1, "甲", "甲是一个条目。"), page_xml(2, "乙", "乙是另一个条目。")])
    fs = fsspec.filesystem("memory")
    fs.pipe("/corpus-test/zhwiki-1-pages-articles.xml.bz2", open(local, "rb").read())
    fs.pipe("/corpus-test/news.json.bz2", bz2.compress('{"news_id": "7", "content": "内容。"}\n'.encode()))
    items = sources.plan_sources(
        ["zhwiki:memory://corpus-test/zhwiki-*.bz2", "news2016zh:memory://corpus-test/news.json.bz2"]
    )
    assert [i["path"].split("corpus-test/")[1] for i in items] == [
        "zhwiki-1-pages-articles.xml.bz2",
        "news.json.bz2",
    ]
    assert all(i["path"].startswith("memory://") for i in items)
    opts = CorpusOptions()
    ids = [
        r["id"]
        for item in items
        for part in sources.split_work(item, opts)
        for r in sources.read_work(part, opts)
    ]
    assert ids == ["zhwiki:1", "zhwiki:2", "news2016zh:7"]
    with storage.open_write("memory://corpus-test/out/x.bin") as f:
        f.write(b"x")
    assert storage.exists("memory://corpus-test/out/x.bin")
    storage.remove("memory://corpus-test/out", recursive=True)
    assert not storage.exists("memory://corpus-test/out/x.bin")

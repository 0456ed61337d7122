"""core.storage: local paths and fsspec URLs through one set of functions, on the local disk, on
memory://, and on gs:// served by a local GCS emulator (tests/conftest.py `bucket`)."""

import bz2
import os
import stat

import fsspec
import pytest

from core import storage
from core.errors import UserError
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


def test_whole_file_writes_are_atomic_and_respect_the_umask(tmp_path):
    path = str(tmp_path / "x" / "m.json")
    old = os.umask(0o022)
    try:
        storage.write_json(path, {"a": 1})
    finally:
        os.umask(old)
    assert storage.read_json(path) == {"a": 1}
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644  # not mkstemp's 0600: a team can read it
    assert os.listdir(tmp_path / "x") == ["m.json"]  # no temporary file left behind


def test_fsspec_url_sources_are_read(tmp_path):
    """memory:// stands for any fsspec filesystem."""
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
    assert ids == [
        "zhwiki:zhwiki-1-pages-articles.xml.bz2:1",
        "zhwiki:zhwiki-1-pages-articles.xml.bz2:2",
        "news2016zh:news.json.bz2:7",
    ]
    with storage.open_write("memory://corpus-test/out/x.bin") as f:
        f.write(b"x")
    assert storage.exists("memory://corpus-test/out/x.bin")
    storage.remove("memory://corpus-test/out", recursive=True)
    assert not storage.exists("memory://corpus-test/out/x.bin")


def test_gcs_files_folders_globs_and_copies(bucket, tmp_path):
    root = f"{bucket}/a"
    storage.write_json(storage.join(root, "x.json"), {"n": 1})
    storage.write_bytes(storage.join(root, "sub", "y.bin"), b"\x00" * 10)
    assert storage.read_json(f"{root}/x.json") == {"n": 1}
    assert storage.isdir(root) and storage.isfile(f"{root}/x.json") and not storage.isfile(root)
    assert storage.listdir(root) == ["sub", "x.json"] and storage.subdirs(root) == ["sub"]
    assert storage.glob(f"{root}/*.json") == [f"{root}/x.json"] and storage.size(f"{root}/sub/y.bin") == 10
    assert storage.checksum(f"{root}/x.json").startswith(("md5Hash:", "crc32c:"))  # no download
    assert storage.sha256(f"{root}/x.json") == storage.sha256(_local_copy(f"{root}/x.json", tmp_path))

    storage.copy(f"{root}/x.json", f"{bucket}/b/x.json")  # within the store
    storage.rename(f"{root}/sub/y.bin", f"{bucket}/b/y.bin")  # copy + delete: no move API needed
    assert not storage.exists(f"{root}/sub/y.bin") and storage.size(f"{bucket}/b/y.bin") == 10
    storage.append_text(f"{bucket}/log.jsonl", "1\n")
    storage.append_text(f"{bucket}/log.jsonl", "2\n")
    assert storage.read_text(f"{bucket}/log.jsonl") == "1\n2\n"
    with storage.open_read(f"{bucket}/b/x.json") as f:  # seekable reads (TFRecord resume, bz2 ranges)
        f.seek(2)
        assert f.read(3) == storage.read_bytes(f"{bucket}/b/x.json")[2:5]

    local = tmp_path / "tree"
    storage.get_dir(f"{bucket}/b", str(local))
    assert sorted(os.listdir(local)) == ["x.json", "y.bin"]
    assert storage.put_dir(str(local), f"{bucket}/c") == [f"{bucket}/c/x.json", f"{bucket}/c/y.bin"]
    with storage.local_folder_for(f"{bucket}/d") as out:
        open(os.path.join(out, "made-here.txt"), "w").write("ok")
    assert storage.read_text(f"{bucket}/d/made-here.txt") == "ok"
    with storage.local_file(f"{bucket}/d/made-here.txt") as p:
        assert open(p).read() == "ok"
    storage.remove(f"{bucket}/c", recursive=True)
    assert not storage.exists(f"{bucket}/c/x.json")


def _local_copy(url: str, tmp_path) -> str:
    target = str(tmp_path / "copy")
    storage.copy(url, target)
    return target


def test_a_failed_block_uploads_nothing(bucket):
    with pytest.raises(RuntimeError):
        with storage.local_folder_for(f"{bucket}/half") as out:
            open(os.path.join(out, "part.txt"), "w").write("half")
            raise RuntimeError("the writer failed")
    assert not storage.exists(f"{bucket}/half/part.txt")


def test_mirror_uploads_what_changed_and_resumes_from_the_bucket(bucket):
    run = f"{bucket}/runs/r1"
    m = storage.Mirror(run)
    with open(m.path("metrics.jsonl"), "w") as f:
        f.write('{"step": 1}\n')
    os.makedirs(m.path("tb"))
    open(m.path("tb", "events.1"), "wb").write(b"e1")
    assert sorted(m.sync()) == [f"{run}/metrics.jsonl", f"{run}/tb/events.1"]
    assert m.sync() == []  # nothing changed, nothing sent
    with open(m.path("metrics.jsonl"), "a") as f:
        f.write('{"step": 2}\n')
    assert m.sync() == [f"{run}/metrics.jsonl"]
    m.close()
    assert not os.path.exists(m.local)  # the temporary copy is gone

    again = storage.Mirror(run)  # a resumed run continues the file that is in the bucket
    again.pull("metrics.jsonl", "tb", "curves.png")  # what does not exist is skipped
    assert open(again.path("metrics.jsonl")).read() == '{"step": 1}\n{"step": 2}\n'
    assert open(again.path("tb", "events.1"), "rb").read() == b"e1"
    again.close()


def test_local_mirror_is_the_folder_itself(tmp_path):
    m = storage.Mirror(str(tmp_path / "run"))
    assert m.local == str(tmp_path / "run") and m.sync() == []
    m.close()
    assert os.path.isdir(tmp_path / "run")  # never removed: it is the user's folder


def test_a_missing_filesystem_package_is_one_line():
    with pytest.raises(UserError, match=r"nosuchproto:// .*|unknown storage protocol"):
        storage.exists("nosuchproto://bucket/x")

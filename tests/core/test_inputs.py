"""core/storage/inputs.py: an input is read as the version that was hashed, or not at all.

Locally the version is (size, mtime, inode), checked when the reader opens the file and again when
it closes it; on a bucket it is the object's generation (tests/faults/test_gcs_faults_cli.py reads
a pinned generation through the fault proxy)."""

from __future__ import annotations

import os

import pytest

from core import storage
from core.errors import InputChanged, StorageFailed


@pytest.fixture
def text(tmp_path) -> str:
    path = tmp_path / "in.txt"
    path.write_bytes(b"first line\nsecond line\n" * 100)
    return str(path)


def test_the_hashed_version_reads_back_whole(text):
    entry = storage.fingerprint(text)
    assert entry["size"] == os.path.getsize(text) and entry["sha256"] == storage.sha256(text)
    with storage.open_input(text, entry["identity"]) as f:
        assert f.read() == open(text, "rb").read()


def test_a_file_rewritten_after_it_was_hashed_is_refused_when_opened(text):
    entry = storage.fingerprint(text)
    with open(text, "r+b") as f:  # the same size, other bytes: only mtime tells
        f.write(b"FIRST")
    os.utime(text, ns=(entry["identity"]["mtime_ns"] + 10**9,) * 2)
    with pytest.raises(InputChanged, match=r"reading .*in\.txt: changed after it was hashed \(mtime_ns"):
        storage.open_input(text, entry["identity"])


def test_a_file_changed_while_it_is_read_is_refused_when_closed(text):
    entry = storage.fingerprint(text)
    reader = storage.open_input(text, entry["identity"])
    reader.read(10)
    with open(text, "ab") as f:
        f.write(b"appended while it was read\n")
    with pytest.raises(InputChanged, match=r"changed after it was hashed \(size"):
        reader.close()


def test_a_file_replaced_while_it_is_read_is_refused_when_closed(text, tmp_path):
    entry = storage.fingerprint(text)
    reader = storage.open_input(text, entry["identity"])
    reader.read()
    other = tmp_path / "other.txt"
    other.write_bytes(open(text, "rb").read())  # the same bytes, another file: renamed over it
    os.replace(other, text)
    with pytest.raises(InputChanged, match="changed after it was hashed .*inode"):
        reader.close()


def test_a_file_deleted_after_it_was_hashed_is_named(text):
    entry = storage.fingerprint(text)
    os.remove(text)
    with pytest.raises(InputChanged, match="deleted or replaced after it was hashed"):
        storage.open_input(text, entry["identity"])
    with pytest.raises(StorageFailed, match="no such file"):  # not pinned: no such file, all the same
        storage.open_input(text)


def test_a_corpus_refuses_an_input_changed_between_the_flows_hashing_and_its_reading(text, tmp_path):
    """The corpus flow hashes the inputs for the stage's key, and the stage reads them later (passed
    as `inputs`): a file changed in between fails the run, and nothing is published."""
    from core.errors import StageFailed
    from pipelines.corpus.sources import plan_sources
    from pipelines.corpus.stage import describe_inputs, run_corpus

    sources = [f"text:{text}"]
    inputs = describe_inputs(plan_sources(sources))
    with open(text, "ab") as f:
        f.write("后来加上的一段文字，不在哈希过的版本里。\n\n".encode())
    out = str(tmp_path / "corpus")
    beam = ["--direct_running_mode", "in_memory", "--direct_num_workers", "1"]
    with pytest.raises(StageFailed, match=r"in\.txt: changed after it was hashed .*no manifest written"):
        run_corpus(sources, out, extra_beam_flags=beam, inputs=inputs)
    assert not os.path.exists(os.path.join(out, "manifest.json"))
    assert not [n for n in os.listdir(out) if n.startswith("docs-")]

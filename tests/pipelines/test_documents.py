"""pipelines/documents.py's text reader: documents end at blank lines, and at a size cap, so a file
without blank lines (or with one endless line) never becomes one document held whole in memory."""

from __future__ import annotations

import tracemalloc

import pytest

from pipelines import documents
from pipelines.documents import read_text_documents


def _old_reader(path):
    """The reader as it was before the caps: the reference output for files with blank lines."""
    name, sentences, n = path.name, [], 0
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line:
            sentences.append(line)
        elif sentences:
            yield documents.make_document(f"text:{name}:{n}", "text", sentences)
            n, sentences = n + 1, []
    if sentences:
        yield documents.make_document(f"text:{name}:{n}", "text", sentences)


def test_files_with_blank_lines_read_as_before(tmp_path):
    path = tmp_path / "in.txt"
    docs = ["".join(f" 第{d}篇的第{s}句话。\n" for s in range(40 + d)) + "\n\n" for d in range(50)]
    path.write_text("\n\n" + "".join(docs) + "尾句。", "utf-8")
    assert list(read_text_documents(str(path))) == list(_old_reader(path))


def test_a_file_without_blank_lines_is_cut_into_documents_under_the_cap(tmp_path, monkeypatch):
    monkeypatch.setattr(documents, "MAX_DOCUMENT_CHARS", 1000)
    monkeypatch.setattr(documents, "MAX_DOCUMENT_SENTENCES", 30)
    lines = [f"这是没有空行的第{i:05d}句话。" for i in range(2000)]  # 15 characters each
    path = tmp_path / "one-block.txt"
    path.write_text("\n".join(lines) + "\n", "utf-8")
    docs = list(read_text_documents(str(path)))
    assert len(docs) > 1
    assert [d["id"] for d in docs] == [f"text:one-block.txt:{n}" for n in range(len(docs))]
    assert [s for d in docs for s in d["sentences"]] == lines  # nothing lost, nothing repeated
    for d in docs:
        assert len(d["sentences"]) <= 30 and sum(map(len, d["sentences"])) <= 1000
    assert all(d.get("_cut") for d in docs[:-1]) and "_cut" not in docs[-1]


def test_an_endless_line_is_read_in_pieces(tmp_path, monkeypatch):
    monkeypatch.setattr(documents, "MAX_DOCUMENT_CHARS", 1000)
    text = "无尽的一行" * 1000  # 5000 characters, no newline at all
    path = tmp_path / "line.txt"
    path.write_text(text, "utf-8")
    docs = list(read_text_documents(str(path)))
    assert len(docs) == 5
    assert "".join(s for d in docs for s in d["sentences"]) == text
    assert all(sum(map(len, d["sentences"])) <= 1000 for d in docs)


def test_streaming_a_large_file_without_blank_lines_keeps_memory_flat(tmp_path):
    """~50 MB of text without one blank line, at the real caps: the reader's Python heap peak stays
    far below the file size (before the caps it held the whole file as one document)."""
    path = tmp_path / "big.txt"
    line = ("没有空行的长文本，" * 6 + "。\n").encode()  # 166 bytes, 56 characters
    with open(path, "wb") as f:
        f.write(line * (50_000_000 // len(line)))
    size = path.stat().st_size
    tracemalloc.start()
    try:
        docs = 0
        for doc in read_text_documents(str(path)):
            assert sum(map(len, doc["sentences"])) < documents.MAX_DOCUMENT_CHARS + 57
            docs += 1
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert docs == pytest.approx(size / 166 * 56 / documents.MAX_DOCUMENT_CHARS, abs=1)
    assert peak < size / 4, f"peak {peak / 1e6:.1f} MB while streaming a {size / 1e6:.0f} MB file"

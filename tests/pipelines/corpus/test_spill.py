"""spill.py and the promise it makes: a document's text never travels through a shuffle."""

import gzip
import json
import os
import random

import pytest
from apache_beam.runners.portability.fn_api_runner import execution

from pipelines.corpus.options import CorpusOptions
from pipelines.corpus.spill import Signatures, SpillWriter, merge_pieces, read_spill, write_piece
from pipelines.corpus.stage import run_corpus
from tests.pipelines.corpus.fixtures import write_jsonl

BODY = "今天北京天气晴朗，气温回升，市民纷纷走出家门参加户外活动。专家表示，这样的天气还将持续一周左右。"
TRACER = "追踪标记句子出现在这里就说明全文被送进了洗牌。"  # in no other text


def test_spill_files_roll_over_and_read_back(tmp_path):
    writer = SpillWriter(str(tmp_path), max_bytes=300)
    places = [writer.add({"id": f"d{i}", "lines": [BODY]}, bytes([i]) * 8) for i in range(5)]
    writer.close()
    stems = sorted({stem for stem, _ in places})
    assert len(stems) > 1  # rolled over
    for stem in stems:
        docs = list(read_spill(str(tmp_path), stem))
        sigs = Signatures(str(tmp_path), stem, 8)
        for position, doc in enumerate(docs):
            i = int(doc["id"][1:])
            assert places[i] == (stem, position) and sigs.sig(position) == bytes([i]) * 8


def test_merge_pieces_is_a_sorted_merge(tmp_path):
    lines = [json.dumps({"id": f"d{i:02d}", "n": i}) for i in range(20)]
    write_piece(str(tmp_path / "a.jsonl"), lines[0::2])
    write_piece(str(tmp_path / "b.jsonl"), lines[1::2])
    merged = merge_pieces([str(tmp_path / "b.jsonl"), str(tmp_path / "a.jsonl")])
    assert [line for line, _ in merged] == lines


@pytest.fixture
def shuffled_bytes(monkeypatch):
    """Every byte string the local runner buffers between stages (its shuffles), as it sees them."""
    seen: list[bytes] = []
    for cls in (execution.ListBuffer, execution.GroupingBuffer):
        original = cls.append

        def append(self, data, _original=original):
            seen.append(bytes(data))
            return _original(self, data)

        monkeypatch.setattr(cls, append.__name__, append)
    return seen


def test_document_text_never_crosses_a_shuffle(tmp_path, shuffled_bytes):
    """The corpus stage on a real runner: a sentence only one document holds (past the 200-character
    excerpt a rejected record keeps) is in the output, and in no buffer between stages."""
    rng = random.Random(0)
    pool = (
        BODY.replace("，", "").replace("。", "")
        + "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动"
    )

    def text():  # six sentences of random characters: passes every quality filter, unlike a repeat
        return "".join("".join(rng.choice(pool) for _ in range(30)) + "。" for _ in range(6))

    docs = [{"news_id": f"n{i}", "title": f"标题{i}", "content": text()} for i in range(30)]
    docs[7]["content"] += TRACER
    docs[8] = dict(docs[7], news_id="n8")  # an exact duplicate: rejected, by id, without its text
    path = tmp_path / "news.json"
    write_jsonl(str(path), docs)
    out = tmp_path / "out"
    run_corpus(
        [f"news2016zh:{path}"],
        str(out),
        CorpusOptions(),
        extra_beam_flags=["--direct_running_mode", "in_memory", "--direct_num_workers", "1"],
    )
    kept = [
        json.loads(line)
        for name in os.listdir(out)
        if name.startswith("docs-")
        for line in gzip.open(out / name, "rt", encoding="utf-8")
    ]
    assert any(TRACER in "".join(d["sentences"]) for d in kept)
    assert shuffled_bytes  # the probe saw the runner's buffers
    tracer = TRACER.encode("utf-8")
    assert not [data[:80] for data in shuffled_bytes if tracer in data]

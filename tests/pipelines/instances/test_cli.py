"""`albert instances` on bad input and bad options."""

from __future__ import annotations

import gzip
import json
import os

from flows.cli import main as albert
from tests.pipelines.instances.fixtures import check_instance
from tests.pipelines.instances.records import parse_dir


def test_cli_on_bad_input_counts_every_reason(tmp_path, vocab_dir, capsys):
    long_sentence = "中国人民" * 200  # far longer than a 128-token sequence
    text = (
        "第一句话。\n第二句话。\n\n"  # fine
        "\n\n\n"  # empty documents
        "只有一句话。\n\n"  # one-sentence document: packed as filler
        f"{long_sentence}\n这是长句之后的一句。\n\n"
        "控制\x07字符\x00在这里。\n正常的一句。\n\n"
    )
    path = tmp_path / "in.txt"
    path.write_bytes(
        text.encode("utf-8")
        + b"\xff one broken byte in a long line of valid text\n"
        + "这是后面的另一句话，它很长。\n\n".encode()
    )
    bad = tmp_path / "garbage.txt"
    bad.write_bytes(b"\xff\xfe\xfd\xfc\xfb\xfa\n\xf0\xf1\n\n")
    out = str(tmp_path / "out")
    code = albert(["instances", "--text", str(path), "--text", str(bad), "--vocab", vocab_dir, "--out", out,
                   "--max-seq-length", "128", "--max-predictions", "20", "--eval-fraction", "0",
                   "--max-dead-letter-fraction", "0.5",  # 1 of 6 documents is broken on purpose
                   "--runner=DirectRunner", "--direct_running_mode=in_memory"])  # fmt: skip
    assert code == 0
    m = json.load(open(os.path.join(out, "manifest.json")))
    assert m["counts"]["skipped"] == {"invalid_utf8": 1}
    notes = m["counts"]["train"]["notes"]
    assert notes["control_chars_removed"] == 2
    assert notes["invalid_utf8_repaired_docs"] == 1
    assert notes["one_sentence_docs_packed_as_filler"] == 1
    assert m["counts"]["train"]["sentences_split_across_sequences"] >= 1
    assert m["summary"]["accounting"]["balanced"]
    skipped = [json.loads(x) for x in gzip.open(os.path.join(out, "skipped-00000.jsonl.gz"), "rt")]
    assert [s["reason"] for s in skipped] == ["invalid_utf8"]
    for r in parse_dir(out):
        check_instance(r)
    assert "fill" in capsys.readouterr().out


def test_cli_errors_are_one_line(tmp_path, vocab_dir, capsys):
    assert albert(["instances", "--vocab", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "spm.model" in err
    assert (
        albert(["instances", "--vocab", vocab_dir, "--out", str(tmp_path / "o"), "--dupe-factor", "0"]) == 2
    )
    assert "dupe_factor" in capsys.readouterr().err


def test_text_without_blank_lines_is_cut_and_the_cuts_are_counted(tmp_path, vocab_dir, monkeypatch):
    """A text file without one blank line becomes several documents at the reader's size cap (not one
    that grows with the file), and the instance stage reports how many were cut in its notes."""
    from pipelines import documents

    monkeypatch.setattr(documents, "MAX_DOCUMENT_CHARS", 400)
    path = tmp_path / "block.txt"
    path.write_text("".join(f"这是没有空行的第{i:04d}句话，后面还有。\n" for i in range(210)), "utf-8")
    out = str(tmp_path / "out")
    code = albert(["instances", "--text", str(path), "--vocab", vocab_dir, "--out", out,
                   "--max-seq-length", "128", "--max-predictions", "20", "--eval-fraction", "0",
                   "--runner=DirectRunner", "--direct_running_mode=in_memory"])  # fmt: skip
    assert code == 0
    m = json.load(open(os.path.join(out, "manifest.json")))
    docs = m["counts"]["train"]["documents"]
    assert docs == 11  # 20 characters a line: a cut after every 20 lines, 10 lines left over
    assert m["counts"]["train"]["notes"]["documents_cut_at_size_cap"] == docs - 1

"""What a command that succeeded must still say, and a run folder where a checkpoint is asked for:

- `albert tokenize --checkpoint RUN` reads the newest checkpoint's vocabulary, as `evaluate`,
  `finetune` and `export` do with a run folder;
- `albert vocab` says so when the vocabulary has fewer pieces than --vocab-size asked;
- `albert instances` says so when --eval-fraction asked for an eval split and it came out empty.
"""

from __future__ import annotations

import json
import os
import shutil

from tests.cli import albert
from tests.model.train_fixtures import cli_args

LINES = "中华人民共和国成立了\nThe quick brown fox.\n\n１９９８年\n"


def test_tokenize_takes_a_run_folder_for_its_newest_checkpoint(
    tmp_path, instances_dir, model_config_file, vocab_dir
):
    run = str(tmp_path / "run")
    albert(*cli_args(instances_dir, run, model_config_file, "--steps", "4", "--save-every", "2")).ok()
    assert sorted(os.listdir(os.path.join(run, "checkpoints"))) == ["step-2", "step-4"]
    by_run = albert("tokenize", "--checkpoint", run, stdin=LINES).ok().out
    by_vocab = albert("tokenize", "--vocab", vocab_dir, stdin=LINES).ok().out
    assert by_run == by_vocab and len(by_run.splitlines()) == 4

    # The newest checkpoint's vocabulary does not verify: the one before it is read, as `latest` does.
    with open(os.path.join(run, "checkpoints", "step-4", "spm.model"), "ab") as f:
        f.write(b"\0")
    assert albert("tokenize", "--checkpoint", run, stdin=LINES).ok().out == by_vocab

    shutil.rmtree(os.path.join(run, "checkpoints"))
    os.makedirs(os.path.join(run, "checkpoints", "step-6"))  # a save cut short: no checksums.json
    albert("tokenize", "--checkpoint", run, stdin=LINES).fails(
        2, f"--checkpoint {run} is a run folder without a complete checkpoint yet"
    )


def test_vocab_says_when_it_has_fewer_pieces_than_asked(tmp_path, sample_docs):
    text = tmp_path / "small.txt"
    text.write_text("\n".join(sample_docs[0]["sentences"][:15]) + "\n", encoding="utf-8")
    out = str(tmp_path / "vocab")
    r = albert("vocab", "--text", str(text), "--out", out, "--vocab-size", "300").ok()
    counts = json.load(open(os.path.join(out, "manifest.json")))["counts"]
    pieces, single = counts["vocab_size"], counts["atomic_single_char_pieces"]
    assert pieces < 300 and 0 < single < pieces
    notes = [line for line in r.err.splitlines() if line.startswith("warning:")]
    assert notes == [
        f"warning: the vocabulary has {pieces} pieces, fewer than --vocab-size 300: SentencePiece found no "
        f"more in this text (15 sentences), where {single} pieces are single CJK characters and punctuation "
        f"marks (split_cjk) that no learned piece may contain; give more text for a larger vocabulary"
    ]
    r = albert("vocab", "--text", str(text), "--out", out, "--vocab-size", str(pieces)).ok()
    assert "warning:" not in r.err


def test_instances_say_when_the_eval_split_is_empty(tmp_path, sample_docs, vocab_dir):
    text = tmp_path / "one.txt"
    text.write_text("\n".join(sample_docs[0]["sentences"]) + "\n", encoding="utf-8")  # one document
    small = ("--max-seq-length", "64", "--max-predictions", "10")
    r = albert("instances", "--text", str(text), "--vocab", vocab_dir, "--out", str(tmp_path / "a"), *small)
    notes = [line for line in r.ok().err.splitlines() if line.startswith("warning:")]
    assert notes == [
        "warning: the eval split is empty at --eval-fraction 0.05: none of the 1 document fell to it "
        "(documents go to it by a hash of their id); give more documents or a larger --eval-fraction for "
        "one, or --eval-fraction 0 to build none"
    ]
    r = albert(
        "instances", "--text", str(text), "--vocab", vocab_dir, "--out", str(tmp_path / "b"), *small,
        "--eval-fraction", "0",
    )  # fmt: skip
    assert "warning:" not in r.ok().err

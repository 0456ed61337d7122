"""`albert corpus`, `albert vocab` and `albert instances` as a user runs them, on input that must not give
a finished-looking output: empty input, a systematic error (dead letters past the limit), accounting,
an --out holding someone else's files, damaged files (spm.model, .gz). Every failure is ONE line naming
the file and the problem, and what is left on disk is checked (docs/trust-pipelines.md)."""

from __future__ import annotations

import gzip
import json
import os
import shutil

import pytest

from core.errors import StageFailed
from tests.cli import albert, flip_bit, tree, truncate

SMALL = ("--max-seq-length", "64", "--max-predictions", "10")
BEAM = ("--direct_running_mode", "in_memory", "--direct_num_workers", "1")  # the corpus' fastest mode


def write_text(path, docs) -> str:
    with open(path, "w", encoding="utf-8") as f:
        for d in docs:
            f.write("\n".join(d["sentences"]) + "\n\n")
    return str(path)


def write_corpus(folder, docs) -> str:
    """A finished corpus-stage folder: one docs shard (lines may be raw strings) and its manifest."""
    from core.manifest import write_manifest

    os.makedirs(folder, exist_ok=True)
    with gzip.open(os.path.join(folder, "docs-00000-of-00001.jsonl.gz"), "wt", encoding="utf-8") as f:
        for d in docs:
            f.write((d if isinstance(d, str) else json.dumps(d, ensure_ascii=False)) + "\n")
    write_manifest(str(folder), "corpus", counts={"documents": len(docs)})
    return str(folder)


def news_record(doc) -> str:
    """A news2016zh line the corpus stage keeps (long Chinese text with terminal punctuation)."""
    return json.dumps({"news_id": doc["id"], "title": doc["title"], "content": "\n".join(doc["sentences"])})


def user_folder(path, names) -> str:
    """A folder of the user's own files, named like the files a stage writes."""
    os.makedirs(path, exist_ok=True)
    for name in names:
        with open(os.path.join(path, name), "w") as f:
            f.write(f"the user's own {name}\n")
    return str(path)


@pytest.fixture(scope="module")
def docs(sample_docs):
    return [d for d in sample_docs if sum(map(len, d["sentences"])) > 200][:30]


@pytest.fixture(scope="module")
def text(tmp_path_factory, docs) -> str:
    return write_text(tmp_path_factory.mktemp("text") / "sample.txt", docs)


@pytest.fixture(scope="module")
def instances(tmp_path_factory, text, vocab_dir) -> str:
    """One successful `albert instances` run."""
    out = str(tmp_path_factory.mktemp("instances") / "out")
    albert("instances", "--text", text, "--vocab", vocab_dir, "--out", out, *SMALL).ok()
    return out


@pytest.fixture(scope="module")
def vocab(tmp_path_factory, text) -> str:
    """A vocabulary folder written by `albert vocab` (with its manifest)."""
    out = str(tmp_path_factory.mktemp("vocab") / "v")
    albert("vocab", "--text", text, "--out", out, "--vocab-size", "2000").ok()
    return out


# --- 5. empty input never makes a "complete" empty output -------------------------------------------


def test_instances_on_an_empty_file_fails_before_any_work(tmp_path, vocab_dir):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    out = tmp_path / "out"
    albert("instances", "--text", str(empty), "--vocab", vocab_dir, "--out", str(out)).fails(
        2, "empty.txt", "empty"
    )
    assert not out.exists()


def test_instances_on_text_without_documents_fails_without_manifest(tmp_path, vocab_dir):
    blank = tmp_path / "blank.txt"
    blank.write_text("\n\n   \n\n")
    out = tmp_path / "out"
    r = albert("instances", "--text", str(blank), "--vocab", vocab_dir, "--out", str(out))
    r.fails(1, "blank.txt", "no document")
    assert not (out / "manifest.json").exists()


def test_instances_whose_documents_are_all_skipped_fails(tmp_path, vocab_dir):
    controls = tmp_path / "controls.txt"
    controls.write_text("\x07\x07\n\x08\n\n\x01\n\n")  # nothing left after normalisation: `empty`
    out = tmp_path / "out"
    r = albert("instances", "--text", str(controls), "--vocab", vocab_dir, "--out", str(out))
    r.fails(1, "all 2 documents", "empty")
    assert not (out / "manifest.json").exists()


def test_corpus_whose_sources_yield_nothing_fails(tmp_path):
    empty, blank = tmp_path / "empty.txt", tmp_path / "blank.txt"
    empty.write_text("")
    blank.write_text("\n\n \n")
    out = tmp_path / "out"
    albert("corpus", "--source", f"text:{empty}", "--out", str(out), *BEAM).fails(2, "empty.txt", "empty")
    assert not out.exists()
    albert("corpus", "--source", f"text:{blank}", "--out", str(out), *BEAM).fails(1, "no record")
    assert not (out / "manifest.json").exists()


def test_vocab_on_empty_input_fails(tmp_path):
    empty, blank = tmp_path / "empty.txt", tmp_path / "blank.txt"
    empty.write_text("")
    blank.write_text("\n \n\n")
    out = tmp_path / "out"
    albert("vocab", "--text", str(empty), "--out", str(out)).fails(2, "empty.txt", "empty")
    assert not out.exists()
    albert("vocab", "--text", str(blank), "--out", str(out)).fails(1, "blank.txt", "no non-empty sentence")
    assert not {"spm.model", "manifest.json"} & set(os.listdir(out))


# --- 6. a systematic error is not a successful corpus ----------------------------------------------


def test_corpus_fails_past_the_dead_letter_fraction_naming_the_commonest_reason(tmp_path, docs):
    source = tmp_path / "news.json"
    wrong_shape = [json.dumps({"news_id": f"n{i}", "content": ["a", "list"]}) for i in range(5)]
    lines = [news_record(d) for d in docs[:20]] + wrong_shape + ["[1, 2]", "{not json"]
    source.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"

    r = albert("corpus", "--source", f"news2016zh:{source}", "--out", str(out), *BEAM)

    line = r.fails(1, "7 of 27 records", "dead letter", "commonest missing_field (6)", "news.json:")
    assert "--max-dead-letter-fraction" in line
    left = os.listdir(out)  # the evidence stays, no half corpus
    assert "stats.json" in left and any(n.startswith("rejected-") for n in left)
    assert "manifest.json" not in left and not any(n.startswith("docs-") for n in left)


@pytest.mark.slow
def test_corpus_dead_letter_limit_is_an_option(tmp_path, docs):
    source = tmp_path / "news.json"
    lines = [news_record(d) for d in docs[:20]] + ["[1, 2]", "{not json"]
    source.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    r = albert("corpus", "--source", f"news2016zh:{source}", "--out", str(out), *BEAM,
               "--max-dead-letter-fraction", "0.2").ok()  # fmt: skip
    counts = json.loads(r.out.strip().splitlines()[-1])
    assert counts["dead_letter"] == 2 and counts["kept"] > 0
    assert (out / "manifest.json").exists()


def test_instances_dead_letters_vs_skips(tmp_path, docs, vocab_dir):
    good = docs[:20]
    empty = [{"id": f"e{i}", "source": "t", "sentences": ["\x07"]} for i in range(3)]  # legitimate skips
    broken = [{"id": f"b{i}", "source": "t", "sentences": "not a list"} for i in range(3)]
    fine = write_corpus(tmp_path / "fine", good + empty)
    bad = write_corpus(tmp_path / "bad", good + broken + ["{not json"])

    albert("instances", "--corpus", fine, "--vocab", vocab_dir, "--out", str(tmp_path / "a"), *SMALL).ok()
    r = albert("instances", "--corpus", bad, "--vocab", vocab_dir, "--out", str(tmp_path / "b"), *SMALL)
    r.fails(1, "4 of 24 documents", "commonest malformed_document (3)", "--max-dead-letter-fraction")
    assert not (tmp_path / "b" / "manifest.json").exists()
    albert("instances", "--corpus", bad, "--vocab", vocab_dir, "--out", str(tmp_path / "b"), *SMALL,
           "--max-dead-letter-fraction", "0.2").ok()  # fmt: skip


def test_instances_with_gold_words_the_text_has_not_fails(tmp_path, text, vocab_dir):
    out = tmp_path / "out"
    r = albert("instances", "--text", text, "--vocab", vocab_dir, "--out", str(out), "--whole-word", "gold")
    r.fails(1, "commonest no_gold_words (30)")
    assert not (out / "manifest.json").exists()


# --- 7. accounting is enforced -------------------------------------------------------------------------


def test_instance_accounting_is_enforced(instances):
    from pipelines.instances import check_accounting

    stats = json.load(open(os.path.join(instances, "stats.json")))
    files = [os.path.join(instances, n) for n in os.listdir(instances) if n.endswith(".tfrecord")]
    check_accounting(stats, files)  # the real run balances...
    manifest = json.load(open(os.path.join(instances, "manifest.json")))
    assert manifest["summary"]["accounting"]["balanced"]
    with pytest.raises(StageFailed, match="documents read 31 != kept 30"):  # ...a lost document does not
        check_accounting({**stats, "documents_read": stats["documents_read"] + 1}, files)
    with pytest.raises(StageFailed, match="TFRecord files on disk"):
        check_accounting(stats, files[1:])


def test_corpus_accounting_failure_is_a_stage_failure(tmp_path, monkeypatch, capsys, docs):
    """The stage's counts say one more record was read than accounted for: exit 1, one line, no
    manifest."""
    from flows.cli import main
    from pipelines.corpus import stage

    real = stage.stats_from_counts

    def one_more_read(counts):
        return real({**counts, "read/news2016zh": counts["read/news2016zh"] + 1})

    monkeypatch.setattr(stage, "stats_from_counts", one_more_read)
    source = tmp_path / "news.json"
    source.write_text("\n".join(news_record(d) for d in docs[:5]) + "\n")
    out = tmp_path / "out"
    assert main(["corpus", "--source", f"news2016zh:{source}", "--out", str(out), *BEAM]) == 1
    ours = [line for line in capsys.readouterr().err.splitlines() if line.startswith("albert corpus:")]
    assert len(ours) == 1 and ours[0].startswith("albert corpus: failed: corpus accounting failed")
    assert not (out / "manifest.json").exists()


# --- 8. --out on a folder that is not ours --------------------------------------------------------------


def test_instances_refuses_a_folder_of_someone_elses_files(tmp_path, text, vocab_dir):
    out = user_folder(tmp_path / "mine", ["a.tfrecord", "skipped-1.jsonl.gz", "manifest.json", "stats.json"])
    before = tree(out)
    r = albert("instances", "--text", text, "--vocab", vocab_dir, "--out", out, *SMALL)
    r.fails(2, out, "not empty", "--force")
    assert tree(out) == before
    # --force takes the folder over: only files of the stage's own kinds are replaced
    user_folder(out, ["notes.txt"])
    albert("instances", "--text", text, "--vocab", vocab_dir, "--out", out, *SMALL, "--force").ok()
    assert open(os.path.join(out, "notes.txt")).read() == "the user's own notes.txt\n"
    assert json.load(open(os.path.join(out, "manifest.json")))["stage"] == "instances"


def test_corpus_refuses_a_folder_of_someone_elses_files(tmp_path):
    out = user_folder(tmp_path / "mine", ["docs-00000-of-00001.jsonl.gz", "rejected-00000-of-00001.jsonl.gz"])
    before = tree(out)
    albert("corpus", "--source", "peoples-daily:", "--out", out, *BEAM).fails(2, out, "not empty", "--force")
    assert tree(out) == before


def test_vocab_refuses_a_folder_of_someone_elses_files(tmp_path, text):
    out = user_folder(tmp_path / "mine", ["spm.model", "spm.vocab", "manifest.json"])
    before = tree(out)
    albert("vocab", "--text", text, "--out", out).fails(2, out, "not empty", "--force")
    assert tree(out) == before


def test_instances_into_the_corpus_folder_is_refused_even_with_force(tmp_path, docs, vocab_dir):
    corpus = write_corpus(tmp_path / "corpus", docs)
    before = tree(corpus)
    r = albert("instances", "--corpus", corpus, "--vocab", vocab_dir, "--out", corpus, *SMALL, "--force")
    r.fails(2, "albert corpus", "its own --out")
    assert tree(corpus) == before


def test_reruns_into_their_own_folder(tmp_path, instances, text, vocab_dir, vocab):
    outputs = json.load(open(os.path.join(instances, "manifest.json")))["outputs"]
    albert("instances", "--text", text, "--vocab", vocab_dir, "--out", instances, *SMALL).ok()
    assert json.load(open(os.path.join(instances, "manifest.json")))["outputs"] == outputs  # same bytes
    # finished instances of other options are replaced only with --force, as `albert corpus` does
    other = ("--text", text, "--vocab", vocab_dir, "--out", instances, *SMALL, "--seed", "7")
    before = tree(instances)
    albert("instances", *other).fails(2, "other inputs, vocabulary or options", "--force")
    assert tree(instances) == before
    albert("instances", *other, "--force").ok()
    # `albert vocab` into its own folder
    albert("vocab", "--text", text, "--out", vocab, "--vocab-size", "2000").ok()


def test_a_failed_run_from_before_the_markers_is_still_ours(tmp_path, text, vocab_dir):
    """The flows cannot pass --force: a folder left by a failed run of older code (records, stats, no
    manifest, no marker) is taken as the stage's own."""
    out = user_folder(tmp_path / "old", ["train-00000-00000-000.tfrecord", "stats.json"])
    albert("instances", "--text", text, "--vocab", vocab_dir, "--out", out, *SMALL).ok()
    assert os.path.exists(os.path.join(out, "manifest.json"))


# --- 11. damaged files: one line naming the file ------------------------------------------------------


def test_a_damaged_spm_model_is_one_line(tmp_path, text, vocab):
    from core.errors import UserError
    from core.tokenizer import Tokenizer

    out = tmp_path / "out"
    garbage = shutil.copytree(vocab, tmp_path / "garbage")
    with open(os.path.join(garbage, "spm.model"), "wb") as f:
        f.write(b"not a model\n")
    os.remove(os.path.join(garbage, "manifest.json"))  # parsing alone must catch this one
    r = albert("instances", "--text", text, "--vocab", str(garbage), "--out", str(out), *SMALL)
    r.fails(2, os.path.join(garbage, "spm.model"), "not a SentencePiece model")
    assert not out.exists()
    # cut or with a bit flipped, the file may still parse (as a model with fewer or other pieces and
    # SentencePiece's default normalisation): the sha256 in the vocabulary's manifest tells
    for damage in (truncate, flip_bit):
        damaged = shutil.copytree(vocab, tmp_path / damage.__name__)
        damage(os.path.join(damaged, "spm.model"))
        r = albert("instances", "--text", text, "--vocab", str(damaged), "--out", str(out), *SMALL)
        r.fails(2, os.path.join(damaged, "spm.model"), "damaged or was replaced")
        with pytest.raises(UserError, match="damaged or was replaced"):  # model/ loads it the same way
            Tokenizer.load(str(damaged))
    assert not out.exists()


def test_a_truncated_gz_input_is_one_line(tmp_path, text, vocab_dir):
    gz = tmp_path / "sample.txt.gz"
    gz.write_bytes(gzip.compress(open(text, "rb").read()))
    truncate(str(gz))
    vocab_out, inst_out, corpus_out = tmp_path / "v", tmp_path / "i", tmp_path / "c"

    albert("vocab", "--text", str(gz), "--out", str(vocab_out)).fails(1, str(gz), "truncated")
    assert not {"spm.model", "manifest.json"} & set(os.listdir(vocab_out))

    r = albert("instances", "--text", str(gz), "--vocab", vocab_dir, "--out", str(inst_out), *SMALL)
    r.fails(1, str(gz), "truncated")
    assert not any(n == "manifest.json" or n.endswith(".tfrecord") for n in os.listdir(inst_out))

    # the corpus stage: what followed the cut is of unknown size, so the run fails naming the file
    r = albert("corpus", "--source", f"text:{gz}", "--out", str(corpus_out), *BEAM)
    r.fails(1, str(gz), "ends early", "--accept-cut-inputs", "no manifest written")
    assert not (corpus_out / "manifest.json").exists()


def test_a_jsonl_gz_cut_at_half_fails_the_corpus_unless_accepted(tmp_path, sample_docs):
    """300 news records, the .gz cut at half: the loss (about 150 records) used to count as one dead
    letter, under the 1% limit, and the run published about half the corpus as if whole."""
    docs = [d for d in sample_docs if sum(map(len, d["sentences"])) > 200]
    lines = [
        json.dumps({"news_id": f"n{i}", "title": d["title"], "content": "\n".join(d["sentences"])}) + "\n"
        for i, d in enumerate((docs * 3)[:300])
    ]
    gz, data = tmp_path / "news.jsonl.gz", "".join(lines).encode("utf-8")
    gz.write_bytes(gzip.compress(data))
    truncate(str(gz))
    out = tmp_path / "c"
    r = albert("corpus", "--source", f"news2016zh:{gz}", "--out", str(out), *BEAM)
    line = r.fails(1, f"{gz}:", "ends early", "cannot be counted", "--accept-cut-inputs")
    where = line.split(f"{gz}:", 1)[1].split(":", 1)[0]
    assert 0 < int(where) < len(data), line  # the byte of its content where the data stops
    assert not (out / "manifest.json").exists() and not list(out.glob("docs-*"))

    accepted = albert(
        "corpus", "--source", f"news2016zh:{gz}", "--out", str(out), "--accept-cut-inputs", *BEAM
    )
    accepted.ok()
    stats = json.loads((out / "stats.json").read_text())
    assert 0 < stats["kept"] < 300 and stats["dead_letter"].get("truncated_input") == 1


# --- 12. messages name options that exist ---------------------------------------------------------------


def test_a_too_small_vocabulary_names_real_options(tmp_path, text):
    r = albert("vocab", "--text", text, "--out", str(tmp_path / "v"), "--vocab-size", "200", "--no-split-cjk")
    line = r.fails(2, "--vocab-size 200 is too small", "give --vocab-size")
    assert "character_coverage" not in line


# --- the same families, not listed ------------------------------------------------------------------------


def test_a_folder_given_as_a_file(tmp_path, vocab_dir):
    folder = tmp_path / "texts"
    folder.mkdir()
    (folder / "a.txt").write_text("一句话。\n\n")
    out = str(tmp_path / "out")
    albert("instances", "--text", str(folder), "--vocab", vocab_dir, "--out", out).fails(2, "is a folder")
    albert("vocab", "--text", str(folder), "--out", out).fails(2, "is a folder")
    albert("corpus", "--source", f"text:{folder}", "--out", out, *BEAM).fails(2, "is a folder")
    assert not os.path.exists(out)


def test_a_corpus_folder_that_is_not_a_finished_corpus(tmp_path, instances, vocab_dir):
    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    (unfinished / "docs-00000-of-00001.jsonl.gz").write_bytes(gzip.compress(b""))
    out = str(tmp_path / "out")
    for cmd in (("instances", "--vocab", vocab_dir), ("vocab",)):
        albert(*cmd, "--corpus", str(unfinished), "--out", out).fails(2, "no manifest.json")
        albert(*cmd, "--corpus", instances, "--out", out).fails(2, "albert instances", "not a corpus")
        albert(*cmd, "--corpus", str(tmp_path / "nope"), "--out", out).fails(2, "no such folder")
    assert not os.path.exists(out)


def test_option_values_out_of_range(tmp_path, text, vocab_dir):
    out = tmp_path / "out"
    args = ("instances", "--text", text, "--vocab", vocab_dir, "--out", str(out), *SMALL)
    albert(*args, "--eval-fraction", "1.5").fails(2, "--eval-fraction")
    albert(*args, "--max-dead-letter-fraction", "2").fails(2, "--max-dead-letter-fraction")
    assert not out.exists()
    # every document held out: no training instance, no manifest
    albert(*args, "--eval-fraction", "0.999").fails(1, "no training instance", "--eval-fraction")
    assert not (out / "manifest.json").exists()


def test_on_gcs_the_same_rules_hold(bucket, text, vocab):
    from core import storage

    # someone's files under a gs:// prefix: refused, untouched
    mine = f"{bucket}/mine"
    storage.write_bytes(f"{mine}/a.tfrecord", b"the user's own records")
    storage.write_bytes(f"{mine}/manifest.json", b"{}")
    r = albert("instances", "--text", text, "--vocab", vocab, "--out", mine, *SMALL)
    r.fails(2, mine, "not empty", "--force")
    assert storage.listdir(mine) == ["a.tfrecord", "manifest.json"]
    assert storage.read_bytes(f"{mine}/a.tfrecord") == b"the user's own records"
    # a damaged vocabulary on gs://
    remote = f"{bucket}/vocab"
    for name in ("spm.model", "spm.vocab", "manifest.json"):
        storage.write_bytes(f"{remote}/{name}", open(os.path.join(vocab, name), "rb").read())
    model = bytearray(storage.read_bytes(f"{remote}/spm.model"))
    model[len(model) // 2] ^= 1
    storage.write_bytes(f"{remote}/spm.model", bytes(model))
    out = f"{bucket}/out"
    r = albert("instances", "--text", text, "--vocab", remote, "--out", out, *SMALL)
    r.fails(2, f"{remote}/spm.model", "damaged or was replaced")
    # a truncated .gz on gs://
    data = gzip.compress(open(text, "rb").read())
    gz = f"{bucket}/in/sample.txt.gz"
    storage.write_bytes(gz, data[: len(data) // 2])
    albert("vocab", "--text", gz, "--out", out).fails(1, gz, "truncated")
    assert not {"spm.model", "manifest.json"} & set(storage.listdir(out))

"""Groups have a size cap: a document far longer than `group_chars` is cut into pieces at sentence ends
(a sentence longer than the cap into pieces of characters or gold words), every group stays under
group_chars plus one sentence, every sentence is used or counted, and documents within the cap group as
before."""

from __future__ import annotations

import json
import os
from collections import Counter

from pipelines.instance_builder import InstanceConfig, PreparedDoc, prepare_document, split_of
from pipelines.instances import resolve_inputs, run_pipeline
from pipelines.instances.grouping import Grouper, cut_sentence, split_document
from tests.pipelines.instances.fixtures import CONFIG, RUNNER, check_instance, write_corpus
from tests.pipelines.instances.records import parse_dir


def huge_documents(sample_docs):
    """A document of 200 articles' sentences (~100k characters), and one of a single ~30k-character
    sentence (a text file without line breaks), both with their gold words."""
    many = sample_docs[40:]
    long_doc = {
        "id": "long",
        "sentences": [s for d in many for s in d["sentences"]],
        "words": [w for d in many for w in d["words"]],
    }
    line = sample_docs[:60]
    one_line = {
        "id": "one-line",
        "sentences": ["".join(s for d in line for s in d["sentences"])],
        "words": [[x for d in line for ws in d["words"] for x in ws]],
    }
    return [long_doc, one_line]


def groups_of(docs, config, normalizer):
    grouper = Grouper(0, config)
    groups = []
    for doc in docs:
        prepared = prepare_document(doc, config.whole_word, notes := Counter(), normalizer)
        groups += grouper.add(prepared, notes)
    return groups + list(grouper.finish())


def test_documents_within_the_cap_group_as_before(sample_docs, tokenizer):
    """The rule before the cap: fill a split's group until it holds group_chars characters."""
    config = InstanceConfig(group_chars=5_000)
    prepared = [prepare_document(d, "zh", Counter(), tokenizer.normalizer) for d in sample_docs]
    assert max(p.chars for p in prepared) <= config.group_chars
    expected, pending, chars = [], {"train": [], "eval": []}, {"train": 0, "eval": 0}
    for p in prepared:
        split = split_of(p.id, config.eval_fraction)
        pending[split].append(p.id)
        chars[split] += p.chars
        if chars[split] >= config.group_chars:
            expected.append((split, pending[split]))
            pending[split], chars[split] = [], 0
    expected += [(s, ids) for s, ids in pending.items() if ids]
    groups = groups_of(sample_docs, config, tokenizer.normalizer)
    assert [(g.split, [d.id for d in g.docs]) for g in groups] == expected
    assert all(g.continued == 0 and g.documents == len(g.docs) for g in groups)
    assert not any(k.endswith("_at_cap") for g in groups for k in g.notes)


def test_a_document_far_over_the_cap_becomes_pieces_in_several_groups(sample_docs, tokenizer):
    config = InstanceConfig(whole_word="gold", group_chars=2_000)
    long_doc, one_line = huge_documents(sample_docs)
    groups = groups_of([long_doc, one_line], config, tokenizer.normalizer)
    pieces = [d for g in groups for d in g.docs]
    longest = max(len(s) for d in pieces for s in d.sentences)
    assert longest <= config.group_chars
    # a group is full once it holds group_chars: a piece ends with the sentence that fills it
    assert all(sum(d.chars for d in g.docs) < config.group_chars + longest for g in groups)
    assert len(groups) >= sum(d.chars for d in pieces) // (config.group_chars + longest) >= 20
    split = {split_of(d["id"], config.eval_fraction) for d in (long_doc, one_line)}
    assert {g.split for g in groups} == split, "the pieces go to their document's split"
    assert sum(g.documents for g in groups) == 2, "a document counts once"
    for doc_id in ("long", "one-line"):
        mine = [d for d in pieces if d.id.rsplit("#", 1)[0] == doc_id]
        assert [d.id for d in mine] == [f"{doc_id}#{k}" for k in range(len(mine))]
        assert all(d.words is not None and ["".join(w) for w in d.words] == d.sentences for d in mine)
    whole = [prepare_document(d, "gold", Counter(), tokenizer.normalizer) for d in (long_doc, one_line)]
    long_pieces = [d for d in pieces if d.id.startswith("long#")]
    assert [s for d in long_pieces for s in d.sentences] == whole[0].sentences, "cut at sentence ends"
    line_pieces = [d for d in pieces if d.id.startswith("one-line#")]
    assert "".join(s for d in line_pieces for s in d.sentences) == whole[1].sentences[0]
    notes = Counter()
    for g in groups:
        notes.update(g.notes)
    assert notes["documents_split_at_cap"] == 2
    assert notes["document_pieces_at_cap"] == len(pieces)
    assert notes["sentences_cut_at_cap"] == 1 + sum(len(s) > 2_000 for s in whole[0].sentences)


def test_a_sentence_longer_than_the_cap_is_cut_at_characters_or_gold_words():
    text = "中国人民" * 700  # 2800 characters
    assert [len(t) for t, _ in cut_sentence(text, None, 1000)] == [1000, 1000, 800]
    words = ["中国", "人民"] * 700
    cut = cut_sentence(text, words, 999)
    assert "".join(t for t, _ in cut) == text and all(len(t) <= 999 for t, _ in cut)
    assert all(t == "".join(w) for t, w in cut), "a piece is whole words"
    doc = PreparedDoc("d", ["短句。", text, "又一句。"], None, 3 + 2800 + 4)
    notes = Counter()
    pieces = split_document(doc, 1000, notes)
    assert [p.sentences for p in pieces] == [
        ["短句。", text[:1000]],
        [text[1000:2000]],
        [text[2000:], "又一句。"],
    ]
    assert [p.id for p in pieces] == ["d#0", "d#1", "d#2"]
    assert notes == {
        "sentences_cut_at_cap": 1,
        "sentence_pieces_at_cap": 3,
        "documents_split_at_cap": 1,
        "document_pieces_at_cap": 3,
    }
    # the first piece fills what the group being filled can still take
    first = split_document(doc, 1000, Counter(), room=2)
    assert [p.sentences for p in first] == [
        ["短句。"],
        [text[:1000]],
        [text[1000:2000]],
        [text[2000:], "又一句。"],
    ]
    assert split_document(doc, 3000, notes := Counter()) == [doc] and not notes
    # just over the cap, and only its last sentence reaches it: the document fills a group whole
    assert split_document(doc, 2805, notes := Counter()) == [doc] and not notes
    whole = split_document(doc, 2000, notes := Counter(), room=2900)
    assert [(p.id, p.sentences) for p in whole] == [("d", ["短句。", text[:2000], text[2000:], "又一句。"])]
    assert notes == {"sentences_cut_at_cap": 1, "sentence_pieces_at_cap": 2}


def test_a_run_over_a_huge_document_accounts_for_every_sentence(tmp_path, sample_docs, vocab_dir, tokenizer):
    """CONFIG.group_chars is 20k: the long document is ~5 groups' worth, the single line ~1.5."""
    config = InstanceConfig(**{**CONFIG.__dict__, "whole_word": "gold"})
    docs = sample_docs[:40] + huge_documents(sample_docs)
    corpus = write_corpus(tmp_path / "c", docs, shards=2)
    out = str(tmp_path / "out")
    m = run_pipeline(resolve_inputs(None, corpus), vocab_dir, out, config, RUNNER)
    acc = m["summary"]["accounting"]
    assert acc["balanced"] and acc["documents_read"] == acc["documents_kept"] == len(docs)
    counts = [m["counts"][s] for s in ("train", "eval") if s in m["counts"]]
    notes = Counter()
    for c in counts:
        notes.update(c["notes"])
    assert notes["documents_split_at_cap"] == 2 and notes["document_pieces_at_cap"] >= 7
    assert notes["sentences_cut_at_cap"] >= 1
    # Every sentence is used or counted, every character of the prepared documents is used.
    raw_sentences = sum(len(d["sentences"]) for d in docs)
    used = sum(c["sentences"] for c in counts)
    assert used == raw_sentences - notes["empty_sentences_dropped"] + (
        notes["sentence_pieces_at_cap"] - notes["sentences_cut_at_cap"]
    )
    prepared = [prepare_document(d, "gold", Counter(), tokenizer.normalizer) for d in docs]
    assert sum(c["characters"] for c in counts) == sum(p.chars for p in prepared)
    stats = json.load(open(os.path.join(out, "stats.json")))
    records = parse_dir(out) + parse_dir(out, "eval")
    assert len(records) == sum(stats[s]["instances"] for s in ("train", "eval") if s in stats) > 100
    for r in records:
        check_instance(r)


def test_cli_cuts_a_text_file_without_line_breaks(tmp_path, sample_docs, vocab_dir, capsys):
    """A text file of one line far over --group-chars (the miniature of a 500 MB line): pieces of at
    most --group-chars characters, valid instances, and the cut reported."""
    from flows.cli import main as albert

    line = "".join(s for d in sample_docs[:30] for s in d["sentences"])
    assert len(line) > 10_000
    path = tmp_path / "one-line.txt"
    path.write_text(line + "\n", encoding="utf-8")
    out = str(tmp_path / "out")
    code = albert(["instances", "--text", str(path), "--vocab", vocab_dir, "--out", out,
                   "--max-seq-length", "128", "--max-predictions", "20", "--eval-fraction", "0",
                   "--group-chars", "2000", "--runner=DirectRunner", "--direct_running_mode=in_memory"])  # fmt: skip
    assert code == 0
    m = json.load(open(os.path.join(out, "manifest.json")))
    notes = m["counts"]["train"]["notes"]
    assert notes["documents_split_at_cap"] == notes["sentences_cut_at_cap"] == 1
    assert notes["document_pieces_at_cap"] == notes["sentence_pieces_at_cap"] == -(-len(line) // 2000)
    assert m["summary"]["accounting"]["balanced"] and m["summary"]["train"]["documents"] == 1
    assert len(m["outputs"]) >= len(line) // 2000 - 1, "about a group per 2000 characters"
    for r in parse_dir(out):
        check_instance(r)
    assert "documents longer than --group-chars 2,000, cut into pieces: 1" in capsys.readouterr().out

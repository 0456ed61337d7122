"""The People's Daily NER task: entities from the tags, BIO, examples within the length limit, the
split by article, and `albert ner-data`."""

from __future__ import annotations

import json

import numpy as np
import pytest

from core.peoples_daily import article_id, ner_split, parse_tagged_line
from model.ner_data import (
    BIO_TAGS,
    MAX_EXAMPLE_CHARS,
    entity_counts,
    entity_scores,
    entity_scores_by_type,
    entity_spans,
    entity_units,
    paragraph_examples,
    split_counts,
    task_examples,
)
from tests.cli import albert


def units(line: str):
    return entity_units(parse_tagged_line(line))


def test_a_surname_and_its_given_name_are_one_person():
    assert units("江/nr  泽民/nr  会见/v  克林顿/nr") == [
        ("江泽民", "PER"),
        ("会见", None),
        ("克林顿", "PER"),
    ]
    # names written one after another pair up left to right
    assert units("江/nr  泽民/nr  李/nr  鹏/nr  乔/nr  石/nr") == [
        ("江泽民", "PER"),
        ("李鹏", "PER"),
        ("乔石", "PER"),
    ]
    assert units("欧阳/nr  山尊/nr") == [("欧阳山尊", "PER")]  # a compound surname
    assert units("雪村/nr  守仁/nr") == [("雪村", "PER"), ("守仁", "PER")]  # two names, no surname
    assert units("老/a  王/nr  说/v") == [("老", None), ("王", "PER"), ("说", None)]


def test_places_and_organisations_are_one_span_a_word_and_other_tags_none():
    assert units("北京/ns  石景山/ns  新华社/nt  《/w  人民日报/nz  》/w") == [
        ("北京", "LOC"),
        ("石景山", "LOC"),
        ("新华社", "ORG"),
        ("《", None),
        ("人民日报", None),
        ("》", None),
    ]


def test_bio_tags_per_character():
    (example,) = paragraph_examples("p/0", parse_tagged_line("江/nr  泽民/nr  到/v  北京/ns  。/w"))
    assert example.id == "p/0/0"
    assert example.chars == list("江泽民到北京。")
    assert example.tags == ["B-PER", "I-PER", "I-PER", "O", "B-LOC", "I-LOC", "O"]
    assert set(example.tags) <= set(BIO_TAGS)
    assert entity_spans(example.tags) == [("PER", 0, 3), ("LOC", 4, 6)]


def test_entity_spans_read_ill_formed_tags_as_conlleval_does():
    assert entity_spans(["I-LOC", "I-LOC", "B-PER", "I-LOC", "O", "B-ORG"]) == [
        ("LOC", 0, 2),
        ("PER", 2, 3),
        ("LOC", 3, 4),
        ("ORG", 5, 6),
    ]


def test_entity_counts_compare_exact_span_and_type_per_example():
    gold = [
        ["B-PER", "I-PER", "O", "B-LOC"],  # 江泽民 ... 京
        ["B-ORG", "I-ORG", "I-ORG", "O"],
        ["O", "O"],
        ["B-LOC", "I-LOC", "O"],
        [],
    ]
    predicted = [
        ["B-PER", "I-PER", "O", "B-ORG"],  # PER exact; LOC predicted as ORG: one FP and one FN
        ["B-ORG", "I-ORG", "O", "O"],  # boundary one short: FP and FN
        ["I-PER", "O"],  # a stray I- opens an entity: FP
        ["I-LOC", "I-LOC", "O"],  # the same span read from a stray I-: a hit
        [],
    ]
    counts = entity_counts(gold, predicted)
    assert counts["true_positives"].tolist() == [1, 0, 0, 1, 0]
    assert counts["false_positives"].tolist() == [1, 1, 1, 0, 0]
    assert counts["false_negatives"].tolist() == [1, 1, 0, 0, 0]
    scores = entity_scores(counts)
    assert (scores["true_positives"], scores["gold_entities"], scores["predicted_entities"]) == (2, 4, 5)
    assert scores["precision"] == pytest.approx(2 / 5) and scores["recall"] == pytest.approx(2 / 4)
    assert scores["entity_f1"] == pytest.approx(2 * 2 / (2 * 2 + 3 + 2)) and scores["n"] == 5
    by_type = entity_scores_by_type(gold, predicted)
    assert by_type["PER"]["true_positives"] == 1 and by_type["PER"]["predicted_entities"] == 2
    assert by_type["ORG"]["gold_entities"] == 1 and by_type["ORG"]["predicted_entities"] == 2
    assert sum(by_type[k]["true_positives"] for k in by_type) == scores["true_positives"]
    # a subset of examples scores from its own sums
    subset = {key: value[[0, 3]] for key, value in counts.items()}
    assert entity_scores(subset)["entity_f1"] == pytest.approx(2 * 2 / (2 * 2 + 1 + 1))
    nothing = entity_scores(entity_counts([["O"]], [["O"]]))
    assert nothing["entity_f1"] == nothing["precision"] == nothing["recall"] == 0.0
    assert isinstance(counts["true_positives"], np.ndarray) and counts["true_positives"].dtype == np.int64
    with pytest.raises(ValueError, match="2 gold tags but 1 predicted"):
        entity_counts([["O", "O"]], [["O"]])


def test_a_long_paragraph_is_cut_after_sentence_ends_never_inside_a_name():
    sentence = (
        "张/nr  三/nr  在/p  上海/ns  工作/v  了/u  很/d  久/a  ，/w  他/r  说/v  ：/w  “/w  好/a  。/w  ”/w"
    )
    paragraph = parse_tagged_line("  ".join([sentence] * 5))  # 18 characters a sentence
    examples = paragraph_examples("p", paragraph, max_chars=40)
    assert [len(e.chars) for e in examples] == [36, 36, 18]  # two whole sentences a piece, quote kept
    assert all("".join(e.chars).endswith("好。”") for e in examples)
    assert sum(len(entity_spans(e.tags)) for e in examples) == 10
    # what follows the last sentence end does not fit with the next word either: it is a piece too
    examples = paragraph_examples(
        "p", parse_tagged_line("甲乙/n  。/w  丙丁戊己庚辛/n  壬癸子丑寅/n"), max_chars=10
    )
    assert ["".join(e.chars) for e in examples] == ["甲乙。", "丙丁戊己庚辛", "壬癸子丑寅"]
    # no sentence end fits: cut between words, the name stays whole
    examples = paragraph_examples("p", parse_tagged_line("张/nr  三/nr  和/c  李/nr  四/nr"), max_chars=3)
    assert ["".join(e.chars) for e in examples] == ["张三和", "李四"]
    assert [e.tags for e in examples] == [["B-PER", "I-PER", "O"], ["B-PER", "I-PER"]]


def test_white_space_is_no_character():
    (example,) = paragraph_examples("p", [("实验 小学", "n"), ("Ｈ Ｋ", "nt")])
    assert example.chars == list("实验小学ＨＫ") and example.tags[-2:] == ["B-ORG", "I-ORG"]


def test_the_shipped_file_gives_the_documented_task():
    examples = task_examples()
    counts = {split: split_counts(found) for split, found in examples.items()}
    assert counts == {
        "train": {
            "articles": 2759,
            "examples": 17876,
            "chars": 1565949,
            "entities": {"PER": 16872, "LOC": 23664, "ORG": 3004},
        },
        "dev": {
            "articles": 140,
            "examples": 916,
            "chars": 84678,
            "entities": {"PER": 1073, "LOC": 1501, "ORG": 171},
        },
        "test": {
            "articles": 326,
            "examples": 2117,
            "chars": 191030,
            "entities": {"PER": 2160, "LOC": 2725, "ORG": 398},
        },
    }
    for split, found in examples.items():
        assert all(ner_split(e.id.split("/")[0]) == split for e in found)
        assert all(0 < len(e.chars) == len(e.tags) <= MAX_EXAMPLE_CHARS for e in found)
    assert examples["train"][0].id == article_id(0) + "/0/0"


def tagged_file(path):
    path.write_text(
        "新年/t  贺词/n\n江/nr  泽民/nr  在/p  北京/ns  讲话/n  。/w\n" * 30, encoding="utf-8"
    )  # 30 articles of two lines
    return str(path)


def test_albert_ner_data_writes_the_splits_and_their_counts(tmp_path):
    out = str(tmp_path / "ner")
    result = albert("ner-data", "--tagged", tagged_file(tmp_path / "tagged.txt"), "--out", out).ok()
    manifest = json.loads((tmp_path / "ner" / "manifest.json").read_text())
    splits = {n: ner_split(article_id(n)) for n in range(30)}
    for split in ("train", "dev", "test"):
        rows = [json.loads(line) for line in (tmp_path / "ner" / f"{split}.jsonl").read_text().splitlines()]
        assert len(rows) == 2 * sum(1 for s in splits.values() if s == split)
        assert manifest["counts"][split]["examples"] == len(rows)
        assert all(set(row) == {"id", "chars", "tags"} for row in rows)
        assert f"ner-data: {split}" in result.out
    assert manifest["stage"] == "ner-data" and manifest["task"] == "peoples-daily-ner"
    assert manifest["counts"]["train"]["entities"]["PER"] == sum(1 for s in splits.values() if s == "train")
    # a second run into its own folder replaces its files; someone else's folder is refused
    albert("ner-data", "--tagged", str(tmp_path / "tagged.txt"), "--out", out).ok()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tagged", "/no/such/199801.txt"], "no such file"),
        (["--max-example-chars", "0"], "--max-example-chars must be at least 1"),
    ],
)
def test_albert_ner_data_bad_input_is_one_line(tmp_path, args, message):
    albert("ner-data", *args, "--out", str(tmp_path / "ner")).fails(2, message)
    assert not (tmp_path / "ner").exists()


def test_albert_ner_data_refuses_an_empty_or_undecodable_file(tmp_path):
    (tmp_path / "empty.txt").write_bytes(b"")
    out = str(tmp_path / "ner")
    albert("ner-data", "--tagged", str(tmp_path / "empty.txt"), "--out", out).fails(2, "empty (0 bytes)")
    (tmp_path / "gbk.txt").write_bytes("北京/ns".encode("gbk"))
    albert("ner-data", "--tagged", str(tmp_path / "gbk.txt"), "--out", out).fails(2, "not UTF-8")
    assert not (tmp_path / "ner" / "manifest.json").exists()


def test_albert_ner_data_refuses_a_folder_of_other_files(tmp_path):
    (tmp_path / "ner").mkdir()
    (tmp_path / "ner" / "notes.txt").write_text("mine")
    tagged = tagged_file(tmp_path / "tagged.txt")
    albert("ner-data", "--tagged", tagged, "--out", str(tmp_path / "ner")).fails(2, "not empty", "--force")

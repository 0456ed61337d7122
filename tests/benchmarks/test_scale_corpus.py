"""The scale corpus: deterministic, copies that keep the sample's structure but share no shingles,
files the real readers parse, and a corpus stage that keeps every copy and removes the planted
near-duplicates (scored by near_dup_scores)."""

from __future__ import annotations

import bz2
import gzip
import json
import os
from collections import Counter

import numpy as np
import pytest

from benchmarks import scale_corpus as sc
from core.errors import UserError
from pipelines.corpus import minhash
from pipelines.corpus.dumps import HEADER, MultistreamWriter, index_path, page_xml, write_dump
from pipelines.corpus.options import CorpusOptions
from pipelines.corpus.sources import plan_sources, read_work, split_work

ARTICLES = 40


def _files(folder: str) -> dict[str, bytes]:
    return {name: open(os.path.join(folder, name), "rb").read() for name in sorted(os.listdir(folder))}


def _read_all(sources: list[str]) -> list[dict]:
    """Every record of the sources, through the corpus stage's planner, splitter and readers."""
    opts = CorpusOptions()
    return [
        r for item in plan_sources(sources) for part in split_work(item, opts) for r in read_work(part, opts)
    ]


@pytest.fixture(scope="module")
def sample():
    return sc.sample_articles(ARTICLES)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("scale") / "x3")
    return sc.write_scale_corpus(out, 3, near_dup_rate=0.1, articles=ARTICLES)


def test_same_arguments_write_identical_files(small, tmp_path):
    again = sc.write_scale_corpus(str(tmp_path / "again"), 3, near_dup_rate=0.1, articles=ARTICLES)
    first, second = _files(small.out_dir), _files(again.out_dir)
    assert sorted(first) == sorted([sc.NEWS_FILE, sc.WIKI_DUMP, index_path(sc.WIKI_DUMP), sc.TRUTH_FILE])
    assert first == second
    other = sc.write_scale_corpus(str(tmp_path / "seed1"), 3, near_dup_rate=0.1, seed=1, articles=ARTICLES)
    changed = _files(other.out_dir)
    assert changed[sc.NEWS_FILE] != first[sc.NEWS_FILE] and changed[sc.WIKI_DUMP] != first[sc.WIKI_DUMP]


def test_copies_keep_lengths_sentences_and_the_frequency_profile(sample):
    bands = sc.frequency_bands(t for title, sents in sample for t in (title, *sents))
    assert sc.copy_articles(sample, sc.copy_table(bands, 0, 0)) == sample  # copy 0 is the sample
    band_of = {ch: b for b, chars in enumerate(bands) for ch in chars}
    base = Counter(ch for _, sents in sample for s in sents for ch in s)
    for k in (1, 2):
        table = sc.copy_table(bands, 0, k)
        assert sorted(table) == sorted(table.values())  # a bijection
        assert all(band_of[chr(a)] == band_of[chr(b)] for a, b in table.items())  # within bands
        copy = sc.copy_articles(sample, table)
        assert copy != sample
        for (_, orig), (_, new) in zip(sample, copy):
            assert [len(s) for s in new] == [len(s) for s in orig]  # lengths and sentence counts
            for s, t in zip(orig, new):  # punctuation and spaces where they were
                assert [c for c in s if sc._char_class(c) is None] == [
                    c for c in t if sc._char_class(c) is None
                ]
        counts = Counter(ch for _, sents in copy for s in sents for ch in s)
        for chars in bands:  # each band's multiset of frequencies is the sample's
            assert sorted(base[c] for c in chars) == sorted(counts[c] for c in chars)
        assert sorted(base.values()) == sorted(counts.values())


def test_copies_share_almost_no_shingles(sample):
    bands = sc.frequency_bands(t for title, sents in sample for t in (title, *sents))
    copies = [sc.copy_articles(sample, sc.copy_table(bands, 0, k)) for k in range(3)]
    shingles = [[minhash.shingles("\n".join(sents)) for _, sents in c] for c in copies]
    for a in range(3):
        for b in range(a + 1, 3):
            same_article = [minhash.jaccard(x, y) for x, y in zip(shingles[a], shingles[b]) if len(x) >= 20]
            assert len(same_article) > ARTICLES // 2 and max(same_article) < 0.05
            pool_a, pool_b = np.concatenate(shingles[a]), np.concatenate(shingles[b])
            assert len(np.intersect1d(pool_a, pool_b)) < 0.01 * len(np.unique(pool_a))


def test_files_parse_with_the_real_readers_and_ids_are_unique(small):
    truth = json.load(open(small.truth_path, encoding="utf-8"))
    records = _read_all(small.sources)
    assert not [r for r in records if "error" in r]
    ids = [r["id"] for r in records]
    assert len(ids) == len(set(ids)) == small.documents == truth["documents"]
    kinds = Counter(r["source"] for r in records)
    assert kinds == truth["by_output"] and min(kinds.values()) > ARTICLES  # both outputs well used
    assert small.planted == truth["planted"] == len(truth["pairs"]) >= 3
    assert {x for pair in truth["pairs"] for x in pair} <= set(ids)
    per_copy = Counter(sc.copy_of(i, truth["wiki_id_stride"]) for i in ids)
    assert sorted(per_copy) == [0, 1, 2] and all(n >= ARTICLES for n in per_copy.values())
    for original, planted in truth["pairs"]:
        assert original.split(":")[0] == planted.split(":")[0]  # a planted copy sits beside its original
        assert sc.copy_of(original, truth["wiki_id_stride"]) == sc.copy_of(planted, truth["wiki_id_stride"])
    # copy 0 in the news file is the sample's text unchanged, one sentence a line
    news = {r["id"]: r["text"] for r in records if r["source"] == "news2016zh"}
    text0 = "\n".join(sc.sample_articles(ARTICLES)[1][1])
    assert news[f"news2016zh:{sc.NEWS_FILE}:scale-0000-00001"] == text0


def test_streaming_dump_writer_writes_what_write_dump_writes(tmp_path):
    for n in (0, 1, 100, 250):
        pages = [page_xml(i, f"条目{i}", f"第{i}条的正文。") for i in range(1, n + 1)]
        whole = str(tmp_path / f"zhwiki-{n}-pages-articles-multistream.xml.bz2")
        index = write_dump(whole, pages, multistream=True)
        streamed = str(tmp_path / f"s{n}" / f"zhwiki-{n}-pages-articles-multistream.xml.bz2")
        with MultistreamWriter(streamed) as w:
            for page in pages:
                w.add(page)
        assert open(streamed, "rb").read() == open(whole, "rb").read()
        assert open(index_path(streamed), "rb").read() == open(index, "rb").read()
    assert bz2.decompress(open(whole, "rb").read()).decode().startswith(HEADER)


def test_bad_arguments_are_refused_before_any_work(tmp_path, capsys):
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "mine.txt").write_text("x")
    with pytest.raises(UserError, match="not empty"):
        sc.write_scale_corpus(str(busy), 1, articles=5)
    assert os.listdir(busy) == ["mine.txt"]
    for bad in ({"copies": 0}, {"near_dup_rate": 1.5}, {"articles": 0}):
        args = {"copies": 1, "near_dup_rate": 0.02, "articles": 5, **bad}
        with pytest.raises(UserError):
            sc.write_scale_corpus(str(tmp_path / "new"), args.pop("copies"), **args)
    assert not (tmp_path / "new").exists()
    assert sc.main(["--copies", "1", "--out", str(busy)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1


# Slow: a benchmark's corpus run (`albert bench scale` is the same code).
@pytest.mark.slow
def test_corpus_stage_keeps_every_copy_and_removes_the_planted(tmp_path):
    from pipelines.corpus.stage import run_corpus

    written = sc.write_scale_corpus(str(tmp_path / "in"), 2, near_dup_rate=0.1, articles=60)
    truth = json.load(open(written.truth_path, encoding="utf-8"))
    corpus = str(tmp_path / "corpus")
    manifest = run_corpus(written.sources, corpus, extra_beam_flags=["--direct_running_mode", "in_memory"])
    assert manifest["counts"]["read"] == written.documents
    rejected = []
    for name in sorted(os.listdir(corpus)):
        if name.startswith("rejected-"):
            with gzip.open(os.path.join(corpus, name), "rt", encoding="utf-8") as f:
                rejected += [json.loads(line) for line in f]
    removals = {r["id"]: r["detail"].rsplit(" of ", 1)[1] for r in rejected if r["reason"] in sc._DUP_REASONS}
    pairs = {frozenset(p) for p in truth["pairs"]}
    assert removals and all(frozenset(kv) in pairs for kv in removals.items())  # only planted ones go
    stride = truth["wiki_id_stride"]
    kept = Counter()
    for name in sorted(os.listdir(corpus)):
        if name.startswith("docs-"):
            with gzip.open(os.path.join(corpus, name), "rt", encoding="utf-8") as f:
                kept.update(sc.copy_of(json.loads(line)["id"], stride) for line in f)
    assert kept[0] > 40 and kept[1] > 40  # both copies survive dedup
    scores = sc.near_dup_scores(corpus, written.truth_path)
    assert 0 <= scores["precision"] <= 1 and 0 <= scores["recall"] <= 1
    assert scores["precision"] == 1.0 and scores["cross_copy_removals"] == 0
    assert scores["found_pairs"] == len(removals) and scores["recall"] >= 0.9
    assert scores["planted"] == written.planted and scores["scorable_pairs"] <= written.planted


@pytest.mark.slow
def test_recall_holds_on_two_whole_copies(tmp_path):
    from pipelines.corpus.stage import run_corpus

    written = sc.write_scale_corpus(str(tmp_path / "in"), 2)
    corpus = str(tmp_path / "corpus")
    run_corpus(written.sources, corpus, extra_beam_flags=["--direct_num_workers", "2"])
    scores = sc.near_dup_scores(corpus, written.truth_path)
    assert scores["planted"] >= 120 and scores["scorable_pairs"] >= 0.9 * scores["planted"]
    assert scores["recall"] >= 0.9 and scores["precision"] >= 0.9
    assert scores["cross_copy_removals"] == 0

import random

import numpy as np
import pytest

from benchmarks import corpus as bench
from benchmarks import sample_text
from pipelines.corpus import minhash
from pipelines.corpus.options import CorpusOptions


def test_edit_text_applies_the_rate_and_keeps_line_breaks():
    rng = random.Random(3)
    text = "\n".join("".join(rng.choice(sample_text.EDIT_POOL) for _ in range(30)) + "。" for _ in range(30))
    edited = sample_text.edit_text(text, 0.1, random.Random(0))
    assert edited.count("\n") == text.count("\n")
    assert edited != text
    a, b = minhash.shingles(text), minhash.shingles(edited)
    assert 0.2 < minhash.jaccard(a, b) < 0.9
    assert sample_text.edit_text(text, 0.0, random.Random(0)) == text


def test_plant_duplicates_groups():
    records = [
        {"id": f"peoples-daily:{i}", "title": "", "text": f"第{i}篇文章。" + "内容很多" * 100}
        for i in range(10)
    ]
    copies, groups = bench.plant_duplicates(records, 3, (0.01, 0.1), seed=1)
    assert len(copies) == 6 and len(groups) == 3
    assert all(len(m) == 3 and m[0].startswith("peoples-daily:") for m in groups.values())


def test_score_merges_counts_recall_and_wrong_merges():
    s = {
        k: np.array(v, dtype=np.uint64)
        for k, v in {"a": [1, 2, 3, 4, 5], "b": [1, 2, 3, 4, 6], "c": [7, 8, 9]}.items()
    }
    groups = {0: ["a", "b"]}
    first = bench.score_merges({"b": "a"}, groups, s)
    assert first["recall_j_ge_0.8"] is None and first["pairs_j_ge_0.8"] == 0  # J(a,b) = 4/6 < 0.8
    score = bench.score_merges({"b": "a", "c": "a"}, groups, s)
    assert score["precision"] == 0.5 and score["merges_below_0.5"] == [("c", "a", 0.0)]
    assert score["merged_share_by_jaccard"]["[0.5,0.8)"] == (1.0, 1)


def test_in_memory_dedup_finds_planted_copies(sample_docs):
    records = [
        {
            "source": "peoples-daily",
            "id": d["id"],
            "title": d["title"],
            "text": "\n".join(d["sentences"]),
            "markup": "plain",
        }
        for d in sample_docs
    ]
    copies, groups = bench.plant_duplicates(records, 30, (0.01, 0.02), seed=0)
    copy_records = [
        {
            "source": "news2016zh",
            "id": f"news2016zh:{bench.PLANTED}:{c['news_id']}",
            "title": "",
            "text": c["content"],
            "markup": "plain",
        }
        for c in copies
    ]
    opts = CorpusOptions()
    shingles = sample_text.cleaned_shingles(records + copy_records, opts)
    sigs = {i: minhash.signature(s, opts.dedup.num_perm) for i, s in shingles.items()}
    score = bench.score_merges(bench.dedup_in_memory(sigs, opts), groups, shingles)
    assert score["pairs_j_ge_0.8"] > 20 and score["recall_j_ge_0.8"] >= 0.95 and score["precision"] >= 0.99


@pytest.mark.slow
def test_run_corpus_bench_reports_every_figure():
    # the plumbing, at the smallest sizes that still give every figure: 300 documents through the single
    # core steps, each curation setting run once (the bench runs each twice and keeps the fastest)
    result = bench.run_corpus_bench(
        originals=50, single_core_limit=300, curation_copies=1, curation_repeats=1
    )
    assert result["pipeline"]["docs_per_s_per_core"] > 0 and result["single_core"]["docs_per_s"]["total"] > 0
    assert result["dedup"]["recall_j_ge_0.8"] >= 0.95 and result["dedup"]["precision"] >= 0.99
    runs = result["curation"]["runs"]
    assert runs["off"]["languages"] == {} and runs["on"]["languages"]  # identification ran only when on
    assert runs["off"]["read"] == runs["on"]["read"] == result["curation"]["documents"]
    table = bench.format_table(result)
    assert "recall" in table and "on/off:" in table

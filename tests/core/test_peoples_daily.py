"""The tagged People's Daily file, read once for two products: its articles and their NER split."""

from __future__ import annotations

from collections import Counter

from core.peoples_daily import (
    HELD_OUT_SPLITS,
    SPLITS,
    article_id,
    is_held_out,
    ner_split,
    sample_path,
    tagged_articles,
)


def test_articles_start_at_headlines_and_keep_their_tags():
    lines = [
        "新年/t  贺词/n\n",
        "江/nr  泽民/nr  在/p  北京/ns  发表/v  讲话/n  。/w\n",
        "（/w  新华社/nt  记者/n  摄/Vg  ）/w\n",  # a photo credit stays with its article
        "第二/m  篇/q\n",
        "\n",
        "正文/n  。/w\n",
    ]
    articles = list(tagged_articles(lines))
    assert (
        [a.id for a in articles]
        == [article_id(0), article_id(1)]
        == [
            "peoples-daily:199801-00000",
            "peoples-daily:199801-00001",
        ]
    )
    assert [a.title for a in articles] == ["新年贺词", "第二篇"]
    assert articles[0].paragraphs[1][:2] == [("江", "nr"), ("泽民", "nr")]
    assert len(articles[0].paragraphs) == 3 and len(articles[1].paragraphs) == 2
    assert list(tagged_articles(lines, limit=1)) == articles[:1]


def test_an_article_reaching_the_cap_goes_on_as_the_next():
    lines = ["这/r  是/v  正文/n  。/w\n"] * 5  # 5 characters a line, no headline
    articles = list(tagged_articles(lines, max_chars=10))
    assert [len(a.paragraphs) for a in articles] == [2, 2, 1]
    assert [a.cut for a in articles] == [True, True, False]


def test_the_split_is_a_fixed_function_of_the_article_id():
    # pinned: a change here moves articles between the NER task's splits AND into or out of pretraining
    assert [ner_split(article_id(n)) for n in range(12)] == [
        "train", "train", "train", "test", "train", "test",
        "train", "train", "train", "train", "train", "train",
    ]  # fmt: skip
    assert HELD_OUT_SPLITS == ("dev", "test") and set(HELD_OUT_SPLITS) < set(SPLITS)
    assert is_held_out(article_id(3)) and not is_held_out(article_id(0))


def test_the_shipped_file_splits_into_fixed_article_counts():
    with open(sample_path(), encoding="utf-8") as lines:
        splits = Counter(ner_split(a.id) for a in tagged_articles(lines))
    assert splits == {"train": 2759, "dev": 140, "test": 326}

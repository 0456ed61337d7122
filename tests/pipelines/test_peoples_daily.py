"""The bundled sample: articles recovered from the People's Daily file, with gold words."""

from __future__ import annotations

from core.peoples_daily import parse_tagged_line
from pipelines.peoples_daily import read_articles


def test_parse_line_splits_words_and_tags():
    assert parse_tagged_line("迈向/v  充满/v  希望/n  １/２/m") == [
        ("迈向", "v"),
        ("充满", "v"),
        ("希望", "n"),
        ("１/２", "m"),
    ]
    # one space also separates (19 places of the shipped file), never joins two items into a word
    assert parse_tagged_line("走向/v  贵乎/v 理/n") == [("走向", "v"), ("贵乎", "v"), ("理", "n")]


def test_articles_are_many_small_documents_with_gold_words():
    docs = list(read_articles())
    assert 3000 < len(docs) < 4000, "articles, never one giant document"
    assert len({d["id"] for d in docs}) == len(docs)
    chars = [sum(map(len, d["sentences"])) for d in docs]
    assert sum(chars) > 1_800_000 and max(chars) < 20_000
    for d in docs:
        assert d["sentences"] and len(d["words"]) == len(d["sentences"])
        for s, w in zip(d["sentences"], d["words"]):
            assert "".join(w) == s
    # a headline opens each article and the speech that follows stays with its headline
    assert docs[0]["title"].startswith("迈向充满希望的新世纪")
    assert any(s.startswith("同胞们、朋友们") for s in docs[0]["sentences"])


def test_limit():
    assert len(list(read_articles(limit=5))) == 5


def test_a_file_without_headlines_is_cut_at_the_document_cap(tmp_path, monkeypatch):
    """Articles end at headlines; a file without any would be one article that grows with the file.
    It is cut at documents.MAX_DOCUMENT_CHARS instead, nothing lost, the cuts marked."""
    from pipelines import documents

    monkeypatch.setattr(documents, "MAX_DOCUMENT_CHARS", 500)
    line = "  ".join(["这/r", "是/v", "没有/v", "标题/n", "的/u", "正文/n", "，/w"] * 4 + ["完/v", "。/w"])
    path = tmp_path / "body.txt"
    path.write_text((line + "\n") * 100, "utf-8")  # 42 characters a line, no headline
    articles = list(read_articles(str(path)))
    assert len(articles) == 9  # a cut after every 12 lines (504 characters), 4 lines left over
    assert all(a.get("_cut") for a in articles[:-1]) and "_cut" not in articles[-1]
    assert all(sum(map(len, a["sentences"])) < 500 + 42 for a in articles)
    assert (
        "".join(s for a in articles for s in a["sentences"])
        == "".join(w for w, _ in parse_tagged_line(line)) * 100
    )
    assert len(list(read_articles(str(path), limit=3))) == 3


def test_the_article_cap_is_the_document_cap():
    """The NER task (model/ner_data.py) reads the articles with core's cap, the corpus with the
    documents' one: equal, so both number the articles alike (and split them alike)."""
    from core.peoples_daily import MAX_ARTICLE_CHARS
    from pipelines import documents

    assert MAX_ARTICLE_CHARS == documents.MAX_DOCUMENT_CHARS


def test_vocab_and_instances_given_no_input_read_the_sample_without_the_ner_eval_articles():
    """`albert vocab` and `albert instances` without an input read the bundled sample directly, not
    through the corpus stage: they too leave the NER task's dev and test articles out."""
    from core.peoples_daily import is_held_out, sample_path
    from pipelines.instances.pipeline import iter_documents
    from pipelines.peoples_daily import pretraining_articles
    from pipelines.vocab import iter_input_sentences

    docs = list(pretraining_articles())
    assert len(docs) == 2759 and not any(is_held_out(d["id"]) for d in docs)  # of 3,225
    assert [d["id"] for d in iter_documents("peoples-daily", sample_path())] == [d["id"] for d in docs]
    sentences, paths = iter_input_sentences(None, None)
    assert paths == [sample_path()] and list(sentences) == [s for d in docs for s in d["sentences"]]

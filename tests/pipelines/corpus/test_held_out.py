"""The NER task's dev and test articles (core.peoples_daily.ner_split) never reach pretraining: the
corpus stage drops them as `held_out_eval`, and nothing of their own text is in the docs shards or in
the instances made from them."""

from __future__ import annotations

import gzip
import json
import os

import pytest

from core.peoples_daily import article_id, ner_split, tagged_articles
from model.ner_data import article_examples
from pipelines.corpus.clean import HELD_OUT_EVAL, clean_record
from pipelines.corpus.options import CorpusOptions
from pipelines.corpus.readers.peoples_daily import read_peoples_daily
from pipelines.corpus.stage import run_corpus
from pipelines.corpus.text_cleaning import normalize_text
from tests.pipelines.corpus.fixtures import write_sample_head

HEAD_LINES = 1500  # the sample's first 1,500 paragraphs: 245 articles, 30 of them held out
RUNNER_FLAGS = ["--direct_running_mode=in_memory"]


@pytest.fixture(scope="module")
def head(tmp_path_factory) -> str:
    return write_sample_head(str(tmp_path_factory.mktemp("sample-head") / "199801-head.txt"), HEAD_LINES)


@pytest.fixture(scope="module")
def articles(head) -> dict[str, list]:
    """{split: the head's articles in it}."""
    with open(head, encoding="utf-8") as lines:
        found = list(tagged_articles(lines))
    return {split: [a for a in found if ner_split(a.id) == split] for split in ("train", "dev", "test")}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, head) -> str:
    out = str(tmp_path_factory.mktemp("corpus"))
    run_corpus([f"peoples-daily:{head}"], out, CorpusOptions(), extra_beam_flags=RUNNER_FLAGS)
    return out


def corpus_documents(folder: str) -> list[dict]:
    docs = []
    for name in sorted(os.listdir(folder)):
        if name.startswith("docs-") and name.endswith(".jsonl.gz"):
            with gzip.open(os.path.join(folder, name), "rt", encoding="utf-8") as f:
                docs += [json.loads(line) for line in f]
    return docs


def cjk_only(text: str) -> str:
    """The text's ideographs only, after the corpus stage's normalization: what is compared between an
    NER example and the corpus (punctuation, digits and white space are normalized or cut there)."""
    return "".join(c for c in normalize_text(text) if "\u4e00" <= c <= "\u9fff")


def example_texts(articles: list) -> list[str]:
    """The NER examples' texts of `articles`, normalized as the corpus stage does."""
    return [normalize_text("".join(e.chars)) for a in articles for e in article_examples(a)]


def own_texts(held_out: list, train: list, min_chars: int = 20) -> list[str]:
    """The held-out examples' texts (normalized) of at least `min_chars` ideographs that no train
    article holds: boilerplate such as 新华社北京１月１日电 is in train articles too, and may reach the
    corpus that way."""
    train_text = "\n".join(cjk_only(t) for t in example_texts(train))
    texts = example_texts(held_out)
    return [t for t in texts if len(cjk_only(t)) >= min_chars and cjk_only(t) not in train_text]


def test_the_reader_marks_held_out_articles_and_cleaning_drops_them(head):
    records = list(read_peoples_daily({"kind": "peoples-daily", "path": head, "name": "head"}))
    marked = {r["where"]: r.get("held_out") for r in records}
    assert marked == {
        r["where"]: (ner_split(r["where"]) if ner_split(r["where"]) != "train" else None) for r in records
    }
    assert set(marked.values()) == {None, "dev", "test"}
    held = next(r for r in records if r.get("held_out"))
    verdict, rejected, _ = clean_record(held, CorpusOptions(), None)
    assert verdict == "drop" and rejected["reason"] == HELD_OUT_EVAL == "held_out_eval"
    # the option off: nothing marked
    unmarked = read_peoples_daily({"kind": "peoples-daily", "path": head, "name": "head"}, False)
    assert not any("held_out" in r for r in unmarked)
    assert article_id(0) == records[0]["where"]


def test_no_dev_or_test_text_reaches_the_corpus(corpus, articles):
    stats = json.load(open(os.path.join(corpus, "stats.json")))
    held_out = articles["dev"] + articles["test"]
    assert stats["dropped"][HELD_OUT_EVAL] == len(held_out) == 30
    assert stats["invariant"]["holds"]
    docs = corpus_documents(corpus)
    kept = {d["id"].rsplit(":", 1)[1] for d in docs}  # peoples-daily:<file>:199801-NNNNN
    assert not kept & {a.id.split(":", 1)[1] for a in held_out}
    text = "\n".join(cjk_only("".join(d["sentences"])) for d in docs)
    held_texts = [cjk_only(t) for t in own_texts(held_out, articles["train"])]
    assert len(held_texts) > 100  # 113 paragraphs (pieces) of their own
    assert not [t for t in held_texts if t in text]
    # the check can fail: the train articles the corpus kept are found in it, nearly all their text
    kept_train = [a for a in articles["train"] if a.id.split(":", 1)[1] in kept]
    train_texts = [cjk_only("".join(e.chars)) for a in kept_train for e in article_examples(a)]
    train_texts = [t for t in train_texts if len(t) >= 20]
    assert sum(t in text for t in train_texts) > 0.95 * len(train_texts)


@pytest.mark.slow
def test_no_dev_or_test_text_reaches_the_instances(tmp_path, corpus, articles, vocab_dir, tokenizer):
    """`albert instances` on that corpus: the instances, their masked tokens put back, hold no 12-token
    run of a held-out example's own text, and do hold the kept train articles' text."""
    import numpy as np

    from pipelines.instance_builder import InstanceConfig
    from pipelines.instances import resolve_inputs, run_pipeline
    from tests.pipelines.instances.fixtures import CONFIG, RUNNER
    from tests.pipelines.instances.records import parse_dir

    out = str(tmp_path / "instances")
    run_pipeline(resolve_inputs(None, corpus), vocab_dir, out, InstanceConfig(**CONFIG.__dict__), RUNNER)
    n = 12
    seen: set[tuple] = set()
    for split in ("train", "eval"):
        for r in parse_dir(out, split):
            ids = r["input_ids"].copy()
            k = int(r["masked_lm_weights"].sum())
            ids[r["masked_lm_positions"][:k]] = r["masked_lm_ids"][:k]  # the original tokens back
            for segment in np.split(ids[: int(r["input_mask"].sum())], np.flatnonzero(ids == 3)):
                tokens = tuple(int(t) for t in segment if t not in (2, 3))
                seen.update(tokens[i : i + n] for i in range(len(tokens) - n + 1))
    assert seen

    def grams(texts):
        out = set()
        for text in texts:
            tokens = tuple(int(t) for t in tokenizer.encode(text))
            out.update(tokens[i : i + n] for i in range(len(tokens) - n + 1))
        return out

    train_grams = grams(example_texts(articles["train"]))
    held_grams = grams(own_texts(articles["dev"] + articles["test"], articles["train"])) - train_grams
    assert len(held_grams) > 10_000
    assert not held_grams & seen
    assert len(train_grams & seen) > 0.7 * len(train_grams)  # 77%: some train articles were dropped

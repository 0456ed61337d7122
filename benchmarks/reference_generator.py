"""The ORIGINAL ALBERT instance generator's algorithm, re-implemented as the benchmark's reference.

google-research/albert's `create_pretraining_data.py`, written here from its description
(docs/albert.md §1), with its behaviour kept on purpose, faults included, so that `albert bench
instances` compares our pipeline with what people actually ran:

- one process; every document is read and tokenized into memory first (tokens as Python strings);
- documents shuffled once, then for each dupe and each document, instances are built document by
  document: one target length per document (L - 3, or with prob short_seq_prob a random 2..L-3),
  sentences accumulated until the target or the document's end, a random A|B cut, a random document's
  sentences as B when the chunk holds one sentence (NSP-style), else a 50% swap for SOP;
  `truncate_seq_pair` trims the longer segment one token at a time, front or back at random;
- n-gram whole-word masking per token in Python (candidate index lists, n drawn with numpy's global,
  unseeded RNG as the original does, 80/10/10 with Python's `random`, random tokens from the whole
  vocabulary, control symbols included);
- every instance is kept in a list, then shuffled, converted to ids piece by piece and written as
  `tf.train.Example` protos with TensorFlow's TFRecordWriter.

Tokenization uses our SentencePiece vocabulary (`sp.encode` per sentence). Word starts follow the
SentencePiece rule (`sp`: a piece starting with "▁" or holding a non-Latin-letter character) or, for
Chinese whole-word masking as albert_zh did (`zh`), rjieba's word boundaries between CJK pieces.
Not for production: it exists to be measured against.
"""

from __future__ import annotations

import argparse
import random
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from core.schema import CLS_PIECE, MASK_PIECE, SEP_PIECE
from core.tokenizer import Tokenizer, is_cjk_char, normalize


@dataclass(frozen=True)
class ReferenceConfig:
    max_seq_length: int = 512
    max_predictions: int = 77
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    dupe_factor: int = 1
    ngram: int = 3
    whole_word: Literal["sp", "zh"] = "sp"
    seed: int = 12345
    """Seeds Python's `random` only; the n-gram draws use numpy's global RNG, like the original."""


@dataclass
class TrainingInstance:
    tokens: list[str]  # [CLS] A [SEP] B [SEP] after masking, unpadded
    segment_ids: list[int]
    token_boundary: list[int]
    is_random_next: bool  # the label: 1 = swapped (or a random document's B)
    masked_lm_positions: list[int]
    masked_lm_labels: list[str]


def _is_latin_letter(ch: str) -> bool:
    return ch.isalpha() and (ch.isascii() or "LATIN" in unicodedata.name(ch, ""))


def is_start_piece(piece: str) -> bool:
    """SentencePiece word start: "▁" first, or any character that is not a Latin letter (punctuation,
    digits, CJK and other scripts are whole words)."""
    return piece.startswith("▁") or not all(_is_latin_letter(c) for c in piece)


def tokenize_sentence(tokenizer: Tokenizer, sentence: str, whole_word: str) -> list[tuple[str, bool]]:
    """One raw sentence -> [(piece, starts a word)]."""
    text = normalize(sentence)
    if not text:
        return []
    pieces = tokenizer.sp.encode(text, out_type=str)
    tokens = [(p, is_start_piece(p)) for p in pieces]
    if whole_word == "zh":
        import rjieba

        word_starts, pos = set(), 0
        for w in rjieba.cut(text):
            word_starts.add(pos)
            pos += len(w)
        offset, prev_cjk = 0, False
        for k, p in enumerate(pieces):
            cjk = len(p) == 1 and is_cjk_char(p)
            if cjk and prev_cjk:  # inside a run of CJK characters the segmenter decides
                tokens[k] = (p, offset in word_starts)
            prev_cjk = cjk
            offset += len(p)  # "▁" stands for one space: surfaces concatenate back to `text`
    return tokens


def read_documents(documents: Iterable[list[str]], tokenizer: Tokenizer, whole_word: str) -> list:
    """All documents in memory, each a list of tokenized non-empty sentences (empty documents dropped)."""
    all_documents = []
    for sentences in documents:
        doc = [t for t in (tokenize_sentence(tokenizer, s, whole_word) for s in sentences) if t]
        if doc:
            all_documents.append(doc)
    return all_documents


def truncate_seq_pair(tokens_a: list, tokens_b: list, max_num_tokens: int, rng: random.Random) -> None:
    """Trim the longer segment one token at a time, from the front or the back at random."""
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        if rng.random() < 0.5:
            del longer[0]
        else:
            longer.pop()


def create_instances_from_document(
    all_documents: list, index: int, config: ReferenceConfig, vocab_words: list[str], rng: random.Random
) -> list[TrainingInstance]:
    document = all_documents[index]
    max_num_tokens = config.max_seq_length - 3
    target = max_num_tokens  # drawn once per document, as in the original
    if rng.random() < config.short_seq_prob:
        target = rng.randint(2, max_num_tokens)
    instances = []
    chunk: list = []
    length = 0
    i = 0
    while i < len(document):
        chunk.append(document[i])
        length += len(document[i])
        if i == len(document) - 1 or length >= target:
            a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
            tokens_a = [t for sentence in chunk[:a_end] for t in sentence]
            tokens_b: list = []
            if len(chunk) == 1:
                # The original's fallback: B from a random other document (an NSP-style negative).
                is_random_next = True
                for _ in range(10):
                    other = rng.randint(0, len(all_documents) - 1)
                    if other != index:
                        break
                random_document = all_documents[other]
                for sentence in random_document[rng.randint(0, len(random_document) - 1) :]:
                    tokens_b.extend(sentence)
                    if len(tokens_b) >= target - len(tokens_a):
                        break
            else:
                tokens_b = [t for sentence in chunk[a_end:] for t in sentence]
                is_random_next = rng.random() < 0.5
                if is_random_next:  # SOP: B before A
                    tokens_a, tokens_b = tokens_b, tokens_a
            truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
            tokens = (
                [CLS_PIECE] + [p for p, _ in tokens_a] + [SEP_PIECE] + [p for p, _ in tokens_b] + [SEP_PIECE]
            )
            starts = [True] + [s for _, s in tokens_a] + [True] + [s for _, s in tokens_b] + [True]
            segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
            instances.append(
                create_masked_lm_predictions(
                    tokens, starts, segment_ids, is_random_next, config, vocab_words, rng
                )
            )
            chunk, length = [], 0
        i += 1
    return instances


def create_masked_lm_predictions(
    tokens: list[str],
    starts: list[bool],
    segment_ids: list[int],
    is_random_next: bool,
    config: ReferenceConfig,
    vocab_words: list[str],
    rng: random.Random,
) -> TrainingInstance:
    # Candidates: lists of token indexes, one list per whole word ([CLS]/[SEP] never candidates).
    cand_indexes: list[list[int]] = []
    boundary = [0] * len(tokens)
    for i, token in enumerate(tokens):
        if token in (CLS_PIECE, SEP_PIECE):
            boundary[i] = 1
            continue
        if cand_indexes and not starts[i]:
            cand_indexes[-1].append(i)
        else:
            cand_indexes.append([i])
            boundary[i] = int(starts[i])
    num_to_predict = min(config.max_predictions, max(1, int(round(len(tokens) * config.masked_lm_prob))))
    ngrams = np.arange(1, config.ngram + 1, dtype=np.int64)
    pvals = (1.0 / ngrams) / (1.0 / ngrams).sum()  # p(n) ∝ 1/n: shorter n-grams favoured
    # For every start word, its 1..ngram-word spans (cut short at the end), in a random order.
    ngram_indexes = [[cand_indexes[k : k + n] for n in ngrams] for k in range(len(cand_indexes))]
    rng.shuffle(ngram_indexes)
    output_tokens = list(tokens)
    masked: list[tuple[int, str]] = []
    covered: set[int] = set()
    for spans in ngram_indexes:
        if len(masked) >= num_to_predict:
            break
        n = int(np.random.choice(ngrams, p=pvals))  # numpy's global RNG, as in the original
        index_set = [i for word in spans[n - 1] for i in word]
        while len(masked) + len(index_set) > num_to_predict and n > 1:  # too long: shorter n
            n -= 1
            index_set = [i for word in spans[n - 1] for i in word]
        if len(masked) + len(index_set) > num_to_predict or any(i in covered for i in index_set):
            continue
        for i in index_set:
            covered.add(i)
            if rng.random() < 0.8:
                replacement = MASK_PIECE
            elif rng.random() < 0.5:
                replacement = tokens[i]
            else:
                replacement = vocab_words[rng.randint(0, len(vocab_words) - 1)]
            output_tokens[i] = replacement
            masked.append((i, tokens[i]))
    masked.sort()
    return TrainingInstance(
        output_tokens, segment_ids, boundary, is_random_next, [i for i, _ in masked], [t for _, t in masked]
    )


def write_instances(instances: list[TrainingInstance], tokenizer: Tokenizer, path: str, config) -> dict:
    """Convert every instance to ids piece by piece and write it as a tf.train.Example."""
    import tensorflow as tf

    L, P = config.max_seq_length, config.max_predictions
    sp = tokenizer.sp

    def ints(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))

    stats = {"instances": 0, "real_tokens": 0, "positions": 0, "masked": 0, "sop_swapped": 0}
    with tf.io.TFRecordWriter(path) as writer:
        for inst in instances:
            input_ids = [sp.piece_to_id(t) for t in inst.tokens]
            n, pad = len(input_ids), [0] * (L - len(input_ids))
            m, pad_p = len(inst.masked_lm_positions), [0] * (P - len(inst.masked_lm_positions))
            features = {
                "input_ids": ints(input_ids + pad),
                "input_mask": ints([1] * n + pad),
                "segment_ids": ints(inst.segment_ids + pad),
                "token_boundary": ints(inst.token_boundary + pad),
                "masked_lm_positions": ints(inst.masked_lm_positions + pad_p),
                "masked_lm_ids": ints([sp.piece_to_id(t) for t in inst.masked_lm_labels] + pad_p),
                "masked_lm_weights": tf.train.Feature(float_list=tf.train.FloatList(value=[1.0] * m + pad_p)),
                "next_sentence_labels": ints([int(inst.is_random_next)]),
            }
            writer.write(tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString())
            stats["instances"] += 1
            stats["real_tokens"] += n
            stats["positions"] += L
            stats["masked"] += m
            stats["sop_swapped"] += int(inst.is_random_next)
    return stats


def generate(
    documents: Iterable[list[str]], tokenizer: Tokenizer, output_path: str, config: ReferenceConfig
) -> dict:
    """documents: each a list of raw sentences. Writes one TFRecord file; returns counts."""
    rng = random.Random(config.seed)
    all_documents = read_documents(documents, tokenizer, config.whole_word)
    vocab_words = [tokenizer.sp.id_to_piece(i) for i in range(tokenizer.vocab_size)]
    rng.shuffle(all_documents)
    instances = []
    for _ in range(config.dupe_factor):
        for index in range(len(all_documents)):
            instances.extend(create_instances_from_document(all_documents, index, config, vocab_words, rng))
    rng.shuffle(instances)
    stats = write_instances(instances, tokenizer, output_path, config)
    stats["documents"] = len(all_documents)
    return stats


def read_text(path: str):
    """The original's input format: one sentence per line, a blank line between documents."""
    doc: list[str] = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                doc.append(line.strip())
            elif doc:
                yield doc
                doc = []
    if doc:
        yield doc


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--input", required=True, help="one sentence per line, blank line between documents")
    p.add_argument("--vocab", required=True, help="spm.model or a folder holding it")
    p.add_argument("--output", required=True, help="the TFRecord file to write")
    d = ReferenceConfig()
    p.add_argument("--max-seq-length", type=int, default=d.max_seq_length)
    p.add_argument("--max-predictions", type=int, default=d.max_predictions)
    p.add_argument("--dupe-factor", type=int, default=d.dupe_factor)
    p.add_argument("--whole-word", choices=("sp", "zh"), default=d.whole_word)
    p.add_argument("--seed", type=int, default=d.seed)
    a = p.parse_args(argv)
    config = ReferenceConfig(
        max_seq_length=a.max_seq_length,
        max_predictions=a.max_predictions,
        dupe_factor=a.dupe_factor,
        whole_word=a.whole_word,
        seed=a.seed,
    )
    stats = generate(read_text(a.input), Tokenizer.load(a.vocab), a.output, config)
    print(stats)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

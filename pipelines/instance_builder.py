"""From prepared documents to serialised, framed TFRecord bytes for one group (pure; no Beam).

    prepare_document : raw document dict -> PreparedDoc, or a skip reason
    build_group      : [PreparedDoc] x dupe -> TFRecord file bytes + stats

The Beam pipeline (pipelines/instances/) only reads, groups, calls these, and writes.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from core.tfrecord import frame_record
from core.tokenizer import EncodedDoc, Tokenizer, WholeWord
from core.tokenizer_normalizer import TextNormalizer, count_bad_chars, normalize, normalize_many
from pipelines.masking import MaskingConfig, mask_batch
from pipelines.packing import PackingConfig, assemble, plan_chunks
from pipelines.tfexample import encode_examples

MAX_INVALID_FRACTION = 0.1
"""A document with more undecodable characters than this is skipped as `invalid_utf8`; fewer are
removed and the document kept (counted as `invalid_utf8_repaired`)."""


@dataclass(frozen=True)
class InstanceConfig:
    packing: PackingConfig = field(default_factory=PackingConfig)
    masking: MaskingConfig = field(default_factory=MaskingConfig)
    whole_word: WholeWord = "zh"
    dupe_factor: int = 1
    seed: int = 12345
    eval_fraction: float = 0.05
    group_chars: int = 1_000_000
    """Documents are packed in groups of about this many characters (consecutive in their input file):
    it bounds memory per worker and is the unit of parallelism."""

    def __post_init__(self):
        if self.dupe_factor < 1:
            raise ValueError(f"dupe_factor must be >= 1, got {self.dupe_factor}")
        if not 0 <= self.eval_fraction < 1:
            raise ValueError(f"eval_fraction must be in [0, 1), got {self.eval_fraction}")
        if self.group_chars < 1000:
            raise ValueError(f"group_chars must be >= 1000, got {self.group_chars}")
        if self.whole_word not in ("zh", "sp", "gold", "none"):
            raise ValueError(f"whole_word must be zh, sp, gold or none, got {self.whole_word!r}")


@dataclass
class PreparedDoc:
    id: str
    sentences: list[str]
    words: list[list[str]] | None
    chars: int


def stable_hash(text: str) -> int:
    """64-bit hash, stable across processes and machines (Python's hash() is salted per process)."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


def split_of(doc_id: str, eval_fraction: float) -> str:
    """Deterministic train/eval split by document id (independent of the seed: a fixed held-out set)."""
    return "eval" if stable_hash("split:" + doc_id) % 1_000_000 < eval_fraction * 1_000_000 else "train"


def prepare_document(
    doc: dict, whole_word: WholeWord, notes: Counter, normalizer: TextNormalizer | None = None
) -> PreparedDoc | str:
    """Normalise and validate one document. Returns the prepared document, or the reason to skip it.

    `normalizer` is the vocabulary's (`Tokenizer.normalizer`); None: the Python rules of the
    identity vocabularies.

    Non-fatal repairs are counted in `notes` (control characters removed, invalid bytes removed,
    empty sentences dropped, one-sentence documents)."""
    if "_error" in doc:
        return str(doc["_error"]).split(":", 1)[0]
    sentences = doc.get("sentences")
    doc_id = doc.get("id")
    if not isinstance(doc_id, str) or not doc_id or not isinstance(sentences, list):
        return "malformed_document"
    if not all(isinstance(s, str) for s in sentences):
        return "malformed_document"
    raw_chars = sum(map(len, sentences))
    invalid, control = count_bad_chars("".join(sentences))
    if raw_chars and invalid > MAX_INVALID_FRACTION * raw_chars:
        return "invalid_utf8"
    if invalid:
        notes["invalid_utf8_repaired_docs"] += 1
        notes["invalid_utf8_chars_removed"] += invalid
    if control:
        notes["control_chars_removed"] += control
    words = None
    if whole_word == "gold":
        gold = doc.get("words")
        if not isinstance(gold, list) or len(gold) != len(sentences):
            return "no_gold_words"
        word = normalizer.word if normalizer is not None else normalize
        words = [[w for w in (word(x) for x in ws) if w] for ws in gold]
        if normalizer is not None and normalizer.dummy_prefix:  # the leading "▁" is a word of its own
            words = [[" ", *ws] if ws else ws for ws in words]
        normalized = ["".join(ws) for ws in words]
    else:
        normalized = normalizer.many(sentences) if normalizer is not None else normalize_many(sentences)
    keep = [k for k, s in enumerate(normalized) if s]
    if len(keep) < len(normalized):
        notes["empty_sentences_dropped"] += len(normalized) - len(keep)
    if not keep:
        return "empty"
    if len(keep) == 1:
        notes["one_sentence_docs_packed_as_filler"] += 1
    normalized = [normalized[k] for k in keep]
    if words is not None:
        words = [words[k] for k in keep]
    return PreparedDoc(doc_id, normalized, words, sum(len(s) for s in normalized))


def group_seed(seed: int, doc_ids: list[str], dupe: int) -> np.random.Generator:
    """The RNG of one (group, dupe): a function of the seed and the group's document ids only, so the
    output does not depend on the runner, the number of workers or the order of processing."""
    h = stable_hash("\n".join(doc_ids))
    return np.random.default_rng([seed, h & 0xFFFFFFFF, h >> 32, dupe])


def encode_group(
    docs: list[PreparedDoc], tokenizer: Tokenizer, whole_word: WholeWord
) -> tuple[EncodedDoc, np.ndarray]:
    """Tokenize the group as one stream (one tokenizer call). Returns (stream, document index of each
    sentence)."""
    sentences = [s for d in docs for s in d.sentences]
    words = [w for d in docs for w in d.words] if whole_word == "gold" else None
    stream = tokenizer.encode_document("group", sentences, whole_word, words)
    sent_doc = np.repeat(np.arange(len(docs)), [len(d.sentences) for d in docs])
    return stream, sent_doc


def build_group(
    docs: list[PreparedDoc], tokenizer: Tokenizer, config: InstanceConfig, dupe: int, stream=None
) -> tuple[bytes, dict]:
    """All instances of one group for one dupe index, as the bytes of one TFRecord file (instances in a
    seeded random order, so each file is shuffled within itself), and the stats of that file.

    `stream` (from `encode_group`) may be passed in to tokenize once for all dupe copies."""
    stream, sent_doc = stream if stream is not None else encode_group(docs, tokenizer, config.whole_word)
    rng = group_seed(config.seed, [d.id for d in docs], dupe)
    L = config.packing.max_seq_length
    plan = plan_chunks(stream.sent_starts, sent_doc, rng, config.packing)
    batch = assemble(plan, stream.ids, stream.word_start, L, tokenizer.cls_id, tokenizer.sep_id)
    m = mask_batch(
        batch.tokens, batch.candidate, batch.word_start, batch.length, rng, config.masking,
        tokenizer.mask_id, tokenizer.ordinary_ids,
    )  # fmt: skip
    n = len(batch.length)
    kinds = np.bincount(m.kinds, minlength=3)
    stats = {
        "instances": n,
        "real_tokens": int(batch.length.sum()),
        "positions": n * L,
        "masked": int(m.count.sum()),
        "masked_as_mask": int(kinds[0]),
        "masked_as_random": int(kinds[1]),
        "masked_as_kept": int(kinds[2]),
        "sop_swapped": int(batch.label.sum()),
        "ngram_drawn": m.ngram_drawn.tolist(),
        "ngram_used": m.ngram_used.tolist(),
        "chunks_dropped_no_boundary": plan.chunks_dropped_no_boundary,
        "tokens_dropped_no_boundary": plan.tokens_dropped_no_boundary,
        "sentences_split_across_sequences": plan.sentences_split,
        "short_targets": plan.short_targets,
    }
    if not n:
        return b"", stats
    real = np.arange(L)[None, :] < batch.length[:, None]
    examples = encode_examples(
        {
            "input_ids": m.input_ids,
            "input_mask": real,
            "segment_ids": batch.segment_ids,
            "token_boundary": batch.word_start,
            "masked_lm_positions": m.positions,
            "masked_lm_ids": m.labels,
            "masked_lm_weights": m.weights,
            "next_sentence_labels": batch.label[:, None],
        }
    )
    return b"".join(frame_record(examples[i]) for i in rng.permutation(n).tolist()), stats


def merge_stats(a: dict, b: dict) -> dict:
    """Sum two stats dicts: numbers add, lists add element-wise (or concatenate if of dicts/str),
    nested dicts merge recursively."""
    out = dict(a)
    for k, v in b.items():
        if k not in out:
            out[k] = v
        elif isinstance(v, dict):
            out[k] = merge_stats(out[k], v)
        elif isinstance(v, list):
            if v and isinstance(v[0], (int, float)) and len(v) == len(out[k]):
                out[k] = [x + y for x, y in zip(out[k], v)]
            else:
                out[k] = out[k] + v
        else:
            out[k] = out[k] + v
    return out

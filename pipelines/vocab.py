"""`albert vocab`: train a SentencePiece unigram vocabulary with ALBERT's conventions.

pad = 0, unk = 1, control symbols [CLS] [SEP] [MASK]; no BOS/EOS. Text is `tokenizer.normalize`d
(NFKC, controls removed, white space folded) before training, and the model uses SentencePiece's
identity normalisation, so encoding never changes the text and pieces align to characters.

`split_cjk` (default on) makes every frequent CJK character and punctuation mark its own piece (as in
Chinese BERT/ALBERT vocabularies, which are character-level for CJK and split punctuation) by declaring
them user-defined symbols, which SentencePiece always cuts out as single pieces; Latin text keeps
learned subword pieces. It also enables the tokenizer's fast path (a table lookup per character). This keeps
Chinese whole-word masking meaningful: a word is a run of character pieces the segmenter groups.

The training sentences are a seeded reservoir sample of the input stream (bounded memory), and
training runs single-threaded, so the same input and seed give the same model bytes.
"""

from __future__ import annotations

import argparse
import collections
import io
import random
import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass

from pipelines.errors import StageFailed, UserError
from pipelines.schema import CONTROL_PIECES
from pipelines.tokenizer import is_cjk_char, normalize


@dataclass
class VocabConfig:
    vocab_size: int = 8000
    """Target size. Google's English ALBERT: 30000; Chinese BERT/ALBERT: 21128. Small corpora may yield
    fewer pieces (the size is a ceiling: training never fails for want of text)."""
    split_cjk: bool = True
    """Every CJK character and punctuation mark of count >= min_cjk_count its own piece."""
    min_cjk_count: int = 2
    max_cjk_fraction: float = 0.85
    """At most this fraction of the vocabulary goes to those single characters; the rest is learned."""
    sample_sentences: int = 2_000_000
    """Reservoir sample size of training sentences."""
    character_coverage: float = 0.9995
    seed: int = 12345

    def __post_init__(self):
        if self.vocab_size < 100:
            raise UserError(f"--vocab-size must be at least 100 (got {self.vocab_size})")
        if self.sample_sentences < 1:
            raise UserError(f"--sample-sentences must be at least 1 (got {self.sample_sentences})")
        if not 0 < self.max_cjk_fraction < 1:  # a field without a CLI option: named as a field
            raise UserError(f"max_cjk_fraction must be in (0, 1), got {self.max_cjk_fraction}")


def reservoir_sample(sentences: Iterable[str], k: int, seed: int) -> tuple[list[str], int]:
    """Uniform sample of k items from a stream of unknown length (Algorithm R). Returns (sample, seen)."""
    rng = random.Random(seed)
    sample: list[str] = []
    seen = 0
    for s in sentences:
        if len(sample) < k:
            sample.append(s)
        else:
            j = rng.randrange(seen + 1)
            if j < k:
                sample[j] = s
        seen += 1
    return sample, seen


def _atomic(ch: str) -> bool:
    return is_cjk_char(ch) or unicodedata.category(ch).startswith("P")


def atomic_symbols(sentences: list[str], config: VocabConfig) -> list[str]:
    """The characters that become single pieces, most frequent first (ties by code point): CJK
    characters and punctuation, as BERT's basic tokenizer splits them."""
    counts = collections.Counter(ch for s in sentences for ch in s if _atomic(ch))
    frequent = sorted(
        (c for c, n in counts.items() if n >= config.min_cjk_count), key=lambda c: (-counts[c], c)
    )
    return frequent[: int(config.vocab_size * config.max_cjk_fraction)]


def train_vocab(
    sentences: Iterable[str], config: VocabConfig, source: str = "the input"
) -> tuple[bytes, dict]:
    """Train on a stream of raw sentences (read from `source`, named in errors). Returns (model proto
    bytes, training stats)."""
    import sentencepiece as spm

    normalized = (t for t in (normalize(s) for s in sentences) if t)
    sample, seen = reservoir_sample(normalized, config.sample_sentences, config.seed)
    if not sample:
        raise StageFailed(f"no text to train a vocabulary on: {source} holds no non-empty sentence")
    sample.sort()  # the sample is a set: its order must not depend on reservoir replacement order
    symbols = atomic_symbols(sample, config) if config.split_cjk else []
    model = io.BytesIO()
    try:
        _train(spm, sample, symbols, config, model)
    except RuntimeError as err:
        raise _vocab_size_error(err, config) from None
    proto = model.getvalue()
    sp = spm.SentencePieceProcessor(model_proto=proto)
    stats = {
        "sentences_seen": seen,
        "sentences_sampled": len(sample),
        "atomic_single_char_pieces": len(symbols),
        "vocab_size": sp.get_piece_size(),
    }
    return proto, stats


def _vocab_size_error(err: RuntimeError, config: VocabConfig) -> Exception:
    """SentencePiece's complaint about the vocabulary size, in terms of this command's options
    (SentencePiece's own advice names trainer flags `albert vocab` does not have)."""
    text = str(err)
    needed = re.search(r"required_chars\. (\d+) vs (\d+)", text)
    if needed:
        return UserError(
            f"--vocab-size {config.vocab_size} is too small for this text: its characters alone need "
            f"{needed.group(2)} pieces; give --vocab-size {needed.group(2)} or more"
        )
    if "Vocabulary size" in text:
        said = text.split("]")[-1].split(". ")[0].strip()
        return UserError(
            f"--vocab-size {config.vocab_size} does not suit this text ({said}); try another --vocab-size"
        )
    return err


def _train(spm, sample: list[str], symbols: list[str], config: VocabConfig, model: io.BytesIO) -> None:
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sample),
        model_writer=model,
        model_type="unigram",
        vocab_size=config.vocab_size,
        hard_vocab_limit=False,
        pad_id=0,
        unk_id=1,
        bos_id=-1,
        eos_id=-1,
        control_symbols=list(CONTROL_PIECES),
        user_defined_symbols=symbols,
        character_coverage=config.character_coverage,
        normalization_rule_name="identity",
        add_dummy_prefix=False,
        remove_extra_whitespaces=True,
        split_by_whitespace=True,
        max_sentence_length=1 << 16,
        num_threads=1,  # multi-threaded EM is not bit-reproducible
        seed_sentencepiece_size=1_000_000,
        minloglevel=2,
    )


def write_vocab(out_dir: str, proto: bytes) -> list[str]:
    """Write spm.model and spm.vocab (piece<TAB>score, the format SentencePiece itself writes)."""
    import sentencepiece as spm

    from pipelines import storage

    model_path = storage.join(out_dir, "spm.model")
    storage.write_bytes(model_path, proto)
    sp = spm.SentencePieceProcessor(model_proto=proto)
    vocab_path = storage.join(out_dir, "spm.vocab")
    storage.write_text(
        vocab_path, "".join(f"{sp.id_to_piece(i)}\t{sp.get_score(i):g}\n" for i in range(sp.get_piece_size()))
    )
    return [model_path, vocab_path]


# ---------------------------------------------------------------------------------------------- CLI


def iter_input_sentences(corpus: str | None, text: str | None) -> tuple[Iterator[str], list[str]]:
    """Sentences from a corpus folder, a text file, or (neither given) the bundled sample.
    Returns (stream of sentences, input paths for the manifest)."""
    from pipelines import documents, peoples_daily, storage

    if corpus and text:
        raise UserError("give either --corpus or --text, not both")
    if text and storage.isdir(text):
        raise UserError(f"--text {text} is a folder: give one text file")
    if text and not storage.isfile(text):
        raise UserError(f"--text {text}: no such file")
    if text and storage.size(text) == 0:
        raise UserError(f"--text {text} is empty (0 bytes): no text to train a vocabulary on")
    if corpus:
        paths = documents.corpus_files(corpus)
        docs = (d for p in paths for d in documents.read_jsonl_documents(p) if "_error" not in d)
    elif text:
        paths = [text]
        docs = documents.read_text_documents(text)
    else:
        paths = [peoples_daily.sample_path()]
        docs = peoples_daily.read_articles(paths[0])
    return (s for d in docs for s in d["sentences"]), paths


def add_arguments(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group()
    src.add_argument("--corpus", help="a corpus-stage folder (docs-*.jsonl.gz + manifest.json)")
    src.add_argument("--text", help="one sentence per line, blank line between documents")
    p.add_argument("--out", required=True, help="output folder: spm.model, spm.vocab, manifest.json")
    p.add_argument(
        "--force",
        action="store_true",
        help="write into --out even when it holds files `albert vocab` did not write "
        "(only spm.model, spm.vocab and manifest.json are replaced)",
    )
    d = VocabConfig()
    p.add_argument("--vocab-size", type=int, default=d.vocab_size)
    p.add_argument(
        "--no-split-cjk",
        dest="split_cjk",
        action="store_false",
        help="let SentencePiece learn multi-character Chinese pieces",
    )
    p.add_argument("--min-cjk-count", type=int, default=d.min_cjk_count)
    p.add_argument("--sample-sentences", type=int, default=d.sample_sentences)
    p.add_argument("--seed", type=int, default=d.seed)


def run(args: argparse.Namespace) -> int:
    from pipelines import outdir, storage
    from pipelines.documents import UnreadableFile
    from pipelines.manifest import MANIFEST, file_sha256, write_manifest

    config = VocabConfig(
        vocab_size=args.vocab_size,
        split_cjk=args.split_cjk,
        min_cjk_count=args.min_cjk_count,
        sample_sentences=args.sample_sentences,
        seed=args.seed,
    )
    sentences, inputs = iter_input_sentences(args.corpus, args.text)
    outdir.claim(args.out, "vocab", force=args.force)  # before the training: it may take hours
    try:
        proto, stats = train_vocab(sentences, config, source=args.corpus or args.text or inputs[0])
    except UnreadableFile as err:  # found while reading, as `albert instances` does: the stage failed
        raise StageFailed(f"{err}; no vocabulary written") from None
    storage.remove(storage.join(args.out, MANIFEST))  # the folder is incomplete until the manifest
    outputs = write_vocab(args.out, proto)
    write_manifest(
        args.out,
        "vocab",
        inputs=[{"path": p, "sha256": file_sha256(p)} for p in inputs],
        config=asdict(config),
        seed=config.seed,
        counts=stats,
        outputs={storage.basename(p): file_sha256(p) for p in outputs},
    )
    print(
        f"vocab: {stats['vocab_size']} pieces ({stats['atomic_single_char_pieces']} single CJK/punctuation characters) "
        f"from {stats['sentences_sampled']:,} of {stats['sentences_seen']:,} sentences -> {args.out}"
    )
    return 0

"""`albert vocab`: train a SentencePiece unigram vocabulary with ALBERT's conventions.

pad = 0, unk = 1, control symbols [CLS] [SEP] [MASK]; no BOS/EOS.

Normalization (`--normalization`):
- `compiled` (default): the rules of `pipelines.vocab_normalization` (white space, control characters, NFKC,
  traditional to simplified, ALBERT's quote rule) are compiled into the model's normalizer, with
  SentencePiece's dummy prefix (a "▁" before each text, as Google's ALBERT vocabularies have). Every
  consumer of `spm.model` then normalizes the same way: our instance stage, fine-tuning and
  `albert tokenize`, the sentencepiece library, and transformers' AlbertTokenizer.
- `python`: the vocabularies made before: SentencePiece's identity normalizer, no dummy prefix, and
  `tokenizer_normalizer.normalize` (NFKC, controls removed, white space folded) applied in Python by each
  consumer of this project. Kept to reproduce those vocabularies; other tools cannot normalize as it.

`split_cjk` (default on) makes every frequent CJK character and punctuation mark its own piece (as in
Chinese BERT/ALBERT vocabularies, which are character-level for CJK and split punctuation) by declaring
them user-defined symbols while training, so that no learned piece contains them; Latin text keeps
learned subword pieces. In a `compiled` vocabulary they are then stored as ordinary pieces of score 0
(the highest a piece can have, so SentencePiece still always cuts them out alone): transformers
turns user-defined pieces into "added tokens", which it matches before normalizing, and a
traditional character would then escape the normalizer. It also enables the tokenizer's fast path (a table lookup per character). This keeps
Chinese whole-word masking meaningful: a word is a run of character pieces the segmenter groups.

The training sentences are a seeded reservoir sample of the input stream (bounded memory), and
training runs single-threaded, so the same input and seed give the same model bytes.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import os
import random
import re
import sys
import tempfile
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass

from core import outdir
from core.config_cli import add_arguments as add_options
from core.config_cli import from_args, opt, section
from core.errors import StageFailed, UserError
from core.schema import CONTROL_PIECES
from core.tokenizer_normalizer import is_cjk_char, normalize
from pipelines.vocab_normalization import rules_tsv

NORMALIZATIONS = ("compiled", "python")
OUTPUTS = ("spm.model", "spm.vocab")  # written by write_vocab, before manifest.json


@dataclass
class VocabConfig:
    """The training parameters (what `manifest.json` records as `config`); the fields with a help
    text are `albert vocab` options."""

    vocab_size: int = opt(8000, "")
    """Target size. Google's English ALBERT: 30000; Chinese BERT/ALBERT: 21128. Small corpora may yield
    fewer pieces (the size is a ceiling: training never fails for want of text)."""
    split_cjk: bool = opt(
        True, "let SentencePiece learn multi-character Chinese pieces", flag="--no-split-cjk"
    )
    """Every CJK character and punctuation mark of count >= min_cjk_count its own piece."""
    min_cjk_count: int = opt(2, "")
    max_cjk_fraction: float = 0.85
    """At most this fraction of the vocabulary goes to those single characters; the rest is learned."""
    sample_sentences: int = opt(2_000_000, "")
    """Reservoir sample size of training sentences."""
    character_coverage: float = 0.9995
    seed: int = opt(12345, "")
    normalization: str = opt(
        "compiled",
        "compiled: the normalization rules live inside spm.model, so transformers and every other "
        "SentencePiece user tokenize as training did (default); python: the older identity vocabulary",
        choices=NORMALIZATIONS,
    )
    """`compiled` (rules inside spm.model) or `python` (identity model, normalized by this project)."""

    def __post_init__(self):
        if self.vocab_size < 100:
            raise UserError(f"--vocab-size must be at least 100 (got {self.vocab_size})")
        if self.sample_sentences < 1:
            raise UserError(f"--sample-sentences must be at least 1 (got {self.sample_sentences})")
        if self.normalization not in NORMALIZATIONS:
            raise UserError(
                f"--normalization must be one of {', '.join(NORMALIZATIONS)}, not {self.normalization!r}"
            )
        if not 0 < self.max_cjk_fraction < 1:  # a field without a CLI option: named as a field
            raise UserError(f"max_cjk_fraction must be in (0, 1), got {self.max_cjk_fraction}")


def reservoir_sample(sentences: Iterable[str], k: int, seed: int) -> tuple[list[str], int]:
    """Uniform sample of k items from a stream of unknown length (Algorithm R). Returns (sample, seen)."""
    rng = random.Random(seed)
    sample: list[str] = []
    seen = 0
    for sentence in sentences:
        if len(sample) < k:
            sample.append(sentence)
        else:
            slot = rng.randrange(seen + 1)
            if slot < k:
                sample[slot] = sentence
        seen += 1
    return sample, seen


def _atomic(ch: str) -> bool:
    return is_cjk_char(ch) or unicodedata.category(ch).startswith("P")


def atomic_symbols(sentences: list[str], config: VocabConfig) -> list[str]:
    """The characters that become single pieces, most frequent first (ties by code point): CJK
    characters and punctuation, as BERT's basic tokenizer splits them."""
    counts = collections.Counter(ch for sentence in sentences for ch in sentence if _atomic(ch))
    frequent = sorted(
        (ch for ch, count in counts.items() if count >= config.min_cjk_count),
        key=lambda ch: (-counts[ch], ch),
    )
    return frequent[: int(config.vocab_size * config.max_cjk_fraction)]


def train_vocab(
    sentences: Iterable[str], config: VocabConfig, source: str = "the input"
) -> tuple[bytes, dict]:
    """Train on a stream of raw sentences (read from `source`, named in errors). Returns (model proto
    bytes, training stats)."""
    import sentencepiece as spm

    if config.normalization == "compiled":
        from pipelines.vocab_normalization import apply_rules as normalize_text
    else:
        normalize_text = normalize
    normalized = (text for text in map(normalize_text, sentences) if text)
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
    if config.normalization == "compiled":
        proto, dropped = drop_repeated_powers(user_defined_to_normal(proto))
    sp = spm.SentencePieceProcessor(model_proto=proto)
    stats = {
        "sentences_seen": seen,
        "sentences_sampled": len(sample),
        "atomic_single_char_pieces": len(symbols),
        "vocab_size": sp.get_piece_size(),
    }
    if config.normalization == "compiled":
        stats["repeated_pieces_dropped"] = dropped
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


def user_defined_to_normal(proto: bytes) -> bytes:
    """The model with its user-defined pieces (all of score 0) stored as ordinary pieces."""
    from sentencepiece import sentencepiece_model_pb2 as pb

    model = pb.ModelProto.FromString(proto)
    for piece in model.pieces:
        if piece.type == pb.ModelProto.SentencePiece.USER_DEFINED:
            piece.type = pb.ModelProto.SentencePiece.NORMAL
    model.normalizer_spec.normalization_rule_tsv = ""  # a temporary path: the same input, the same bytes
    return model.SerializeToString()


def _primitive_root(piece: str) -> tuple[str, int]:
    """(w, k) with piece == w * k and k largest ("111" -> ("1", 3), "abab" -> ("ab", 2))."""
    length = len(piece)
    for size in range(1, length // 2 + 1):
        if length % size == 0 and piece[:size] * (length // size) == piece:
            return piece[:size], length // size
    return piece, 1


def drop_repeated_powers(proto: bytes) -> tuple[bytes, int]:
    """Keep only the shortest of the pieces that are powers of one string ("1", "11", "111" -> "1").

    Two such pieces commute ("1" "11" spells what "11" "1" spells), so a text like "11111" has several
    segmentations of exactly equal score. SentencePiece and transformers' Unigram break such ties
    differently (by float rounding), and no tokenizer could then agree with both. Without them, every
    segmentation has a unique best score in practice. Returns (model, number of pieces dropped)."""
    from sentencepiece import sentencepiece_model_pb2 as pb

    model = pb.ModelProto.FromString(proto)
    normal = pb.ModelProto.SentencePiece.NORMAL
    shortest: dict[str, int] = {}
    for piece in model.pieces:
        if piece.type == normal:
            root, repeats = _primitive_root(piece.piece)
            shortest[root] = min(shortest.get(root, repeats), repeats)
    keep = [
        piece
        for piece in model.pieces
        if piece.type != normal
        or _primitive_root(piece.piece)[1] == shortest[_primitive_root(piece.piece)[0]]
    ]
    dropped = len(model.pieces) - len(keep)
    if dropped:
        del model.pieces[:]
        model.pieces.extend(keep)
    return model.SerializeToString(), dropped


def _train(spm, sample: list[str], symbols: list[str], config: VocabConfig, model: io.BytesIO) -> None:
    if config.normalization == "compiled":
        with tempfile.TemporaryDirectory() as tmp:
            rules = os.path.join(tmp, "rules.tsv")
            with open(rules, "w", encoding="utf-8") as f:
                f.write(rules_tsv())
            _train_spm(
                spm, sample, symbols, config, model, normalization_rule_tsv=rules, add_dummy_prefix=True
            )
    else:
        _train_spm(
            spm, sample, symbols, config, model, normalization_rule_name="identity", add_dummy_prefix=False
        )


def _train_spm(
    spm, sample: list[str], symbols: list[str], config: VocabConfig, model: io.BytesIO, **normalizer
) -> None:
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
        remove_extra_whitespaces=True,
        **normalizer,
        split_by_whitespace=True,
        max_sentence_length=1 << 16,
        num_threads=1,  # multi-threaded EM is not bit-reproducible
        seed_sentencepiece_size=1_000_000,
        minloglevel=2,
    )


def write_vocab(out_dir: str, proto: bytes) -> list[str]:
    """Write spm.model and spm.vocab (piece<TAB>score, the format SentencePiece itself writes)."""
    import sentencepiece as spm

    from core import storage

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
    """Sentences from a corpus folder, a text file, or (neither given) the bundled sample without the
    NER task's dev and test articles (docs/ner.md).
    Returns (stream of sentences, input paths for the manifest)."""
    from core import storage
    from core.peoples_daily import sample_path
    from pipelines import documents, peoples_daily

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
        paths = [sample_path()]
        docs = peoples_daily.pretraining_articles(paths[0])  # without the NER dev/test articles
    return (s for d in docs for s in d["sentences"]), paths


@dataclass(kw_only=True)
class VocabOptions:
    """`albert vocab`: where the text comes from, where the vocabulary goes, how it is trained."""

    corpus: str | None = opt(
        None, "a corpus-stage folder (docs-*.jsonl.gz + manifest.json)", exclusive="input"
    )
    text: str | None = opt(None, "one sentence per line, blank line between documents", exclusive="input")
    out: str = opt(help="output folder: spm.model, spm.vocab, manifest.json")
    force: bool = opt(
        False,
        "write into --out even when it holds files `albert vocab` did not write "
        "(only spm.model, spm.vocab and manifest.json are replaced)",
        run=True,
    )
    config: VocabConfig = section(VocabConfig)


@outdir.scope()  # the lock of opts.out (outdir.claim) is held until the run ends
def run_vocab(opts: VocabOptions) -> dict:
    """Train the vocabulary of `opts` into `opts.out` and write its manifest, last. Returns the manifest.

    UserError before any work for bad inputs or a folder that is not ours; StageFailed when the input
    cannot be read to its end or holds no text."""
    from core import storage
    from core.manifest import MANIFEST, write_manifest
    from pipelines.documents import UnreadableFile

    config = opts.config
    sentences, inputs = iter_input_sentences(opts.corpus, opts.text)
    read = [("the input --corpus", opts.corpus), ("the input --text", opts.text)]
    outdir.claim(opts.out, "vocab", force=opts.force, inputs=read)  # before the training: it may take hours
    try:
        proto, stats = train_vocab(sentences, config, source=opts.corpus or opts.text or inputs[0])
    except UnreadableFile as err:  # found while reading, as `albert instances` does: the stage failed
        raise StageFailed(f"{err}; no vocabulary written") from None
    storage.remove(storage.join(opts.out, MANIFEST))  # the folder is incomplete until the manifest
    try:
        outputs = write_vocab(opts.out, proto)
        manifest = write_manifest(
            opts.out,
            "vocab",
            inputs=[{"path": p, "sha256": storage.sha256(p)} for p in inputs],
            config=asdict(config),
            seed=config.seed,
            counts=stats,
            outputs={storage.basename(p): storage.sha256(p) for p in outputs},
        )
    except BaseException:  # a full disk, Ctrl-C: no half vocabulary (spm.model without spm.vocab) stays
        for name in OUTPUTS:
            with contextlib.suppress(OSError):  # an error here must not hide the one that says why
                storage.remove(storage.join(opts.out, name))
        raise
    print(
        f"vocab: {stats['vocab_size']} pieces ({stats['atomic_single_char_pieces']} single CJK/punctuation characters) "
        f"from {stats['sentences_sampled']:,} of {stats['sentences_seen']:,} sentences -> {opts.out}"
    )
    note = size_note(stats, config)
    if note:
        print(note, file=sys.stderr)
    return manifest


def size_note(stats: dict, config: VocabConfig) -> str | None:
    """One line when the vocabulary has fewer pieces than --vocab-size asked (None otherwise). The
    size is a ceiling, not a demand: a small text holds fewer pieces than asked, and SentencePiece
    (hard_vocab_limit off) then keeps what there is; the run succeeds and says so. Refusing would
    fail every small run (the demo's 8000 on the bundled sample gives 4,751), while the model
    takes its size from spm.model, so fewer pieces break nothing downstream."""
    got, asked = stats["vocab_size"], config.vocab_size
    why = size_reasons(stats, asked)
    if not why:
        return None
    if got + stats.get("repeated_pieces_dropped", 0) < asked:
        why.insert(1, "give more text for a larger vocabulary")
    return f"warning: the vocabulary has {got} pieces, fewer than --vocab-size {asked}: " + "; ".join(why)


def size_reasons(stats: dict, asked: int) -> list[str]:
    """Why a vocabulary (its training stats) has fewer pieces than `asked`, as far as the code knows;
    empty when it has not. With split_cjk, the frequent CJK characters and punctuation marks are
    pieces of their own and no learned piece may contain one, so SentencePiece learns the rest only
    from the text around them (Latin words, digits): on the bundled sample, 8000 asked gives 4,751
    pieces with split_cjk (4,054 of them single characters), 7,972 without."""
    got = stats["vocab_size"]
    dropped, atomic = stats.get("repeated_pieces_dropped", 0), stats.get("atomic_single_char_pieces", 0)
    if got >= asked:
        return []
    why = []
    if got + dropped < asked:
        found = f"SentencePiece found no more in this text ({stats['sentences_sampled']:,} sentences)"
        if atomic:
            found += (
                f", where {atomic:,} pieces are single CJK characters and punctuation marks (split_cjk) "
                "that no learned piece may contain"
            )
        why.append(found)
    if dropped:
        why.append(f"{dropped} repeated pieces were dropped (such as '11' beside '1')")
    return why


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_options(p, VocabOptions)


def run(args: argparse.Namespace) -> int:
    run_vocab(from_args(VocabOptions, args))
    return 0

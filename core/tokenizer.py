"""SentencePiece tokenization with word boundaries, vectorised per document.

`Tokenizer.encode_document` turns a document (a list of sentences) into one flat array of piece ids,
the sentence offsets into it, and a word-start flag per piece, in a handful of C++/numpy calls per
document (never a Python loop per token): that is what lets the instance stage run at >1M tokens/s/core.

Word starts (`token_boundary` in the instance schema, and the unit of whole-word masking):
- `sp`:   a piece starts a word when it starts with "▁", is punctuation, or is not Latin script
          (each CJK piece is its own word); also when the script class changes (the Latin piece in
          "用NLP" starts a word) and at every sentence start.
- `zh`:   as `sp` for non-CJK pieces, but a CJK piece starts a word only where the Chinese word
          segmenter (rjieba, the Rust jieba) starts one: all characters of a word are masked together.
- `gold`: as `zh`, with the document's own word segmentation (`doc["words"]`) instead of the segmenter.
- `none`: every piece is a word (token-level masking).

Normalization happens once, before both the segmenter and SentencePiece (`TextNormalizer`, in
core.tokenizer_normalizer: the model's compiled table, or the Python rules of older identity
vocabularies), and pieces are then cut from the normalized text with an identity normalizer, so the
pieces' surfaces concatenate back to exactly the normalized text and offsets are a cumulative sum of
piece lengths. Runs holding an unknown piece (whose surface length is not in the vocabulary) are re-encoded as
surface strings to get their lengths.

Fast path (vocabularies from `albert vocab` with split_cjk): CJK characters and punctuation are
user-defined single-character pieces, so they are looked up per code point in a table, and only the
runs between them go through SentencePiece. It gives exactly SentencePiece's own output (a test checks
it on the whole sample) at several times the speed.
"""

from __future__ import annotations

import itertools
import unicodedata
from dataclasses import dataclass
from typing import Literal

import numpy as np

from core.errors import UserError
from core.schema import CLS_PIECE, MASK_PIECE, PAD_ID, SEP_PIECE, UNK_ID
from core.tokenizer_normalizer import TextNormalizer, identity_model, is_cjk_char
from core.tokenizer_normalizer import normalize as normalize  # the Python rules, for the tokenizer's users

WholeWord = Literal["zh", "sp", "gold", "none"]
WHOLE_WORD_MODES = ("zh", "sp", "gold", "none")

# Piece classes: the script of a piece's first character.
CLASS_SPECIAL, CLASS_CJK, CLASS_PUNCT, CLASS_OTHER = 0, 1, 2, 3
_SENTENCE_BREAK = -2  # char_table value of "\n", which joins the sentences of a document


def piece_class(piece: str) -> int:
    body = piece.lstrip("▁")
    if not body:
        return CLASS_OTHER  # the lone "▁" piece: a word start by the ▁ rule
    first = body[0]
    if is_cjk_char(first):
        return CLASS_CJK
    if unicodedata.category(first).startswith("P") or unicodedata.category(first).startswith("S"):
        return CLASS_PUNCT
    if unicodedata.category(first).startswith("L") and not _is_latin(first):
        return CLASS_CJK  # other non-Latin scripts (kana, hangul, ...): each piece its own word, as CJK
    return CLASS_OTHER


def _is_latin(ch: str) -> bool:
    return ch.isascii() or "LATIN" in unicodedata.name(ch, "")


@dataclass
class EncodedDoc:
    """One tokenized document. N = number of pieces, S = number of sentences."""

    id: str
    ids: np.ndarray  # (N,) int32 piece ids
    sent_starts: np.ndarray  # (S+1,) int32: sentence k is ids[sent_starts[k]:sent_starts[k+1]]
    word_start: np.ndarray  # (N,) bool

    @property
    def num_sentences(self) -> int:
        return len(self.sent_starts) - 1


class Tokenizer:
    """A SentencePiece model plus the per-piece tables that whole-word masking needs."""

    RUN_CACHE_LIMIT = 200_000
    """Runs memoised by `_encode_runs` before the memo starts over (it bounds a worker's memory)."""

    def __init__(self, model_proto: bytes):
        import sentencepiece as spm

        self.model_proto = model_proto
        self.sp = spm.SentencePieceProcessor(model_proto=model_proto)
        self.normalizer = TextNormalizer(model_proto, self.sp)
        # Segments normalized text (see identity_model); the identity vocabularies segment with sp.
        self.seg = (
            spm.SentencePieceProcessor(model_proto=identity_model(model_proto))
            if self.normalizer.compiled
            else self.sp
        )
        n = self.sp.get_piece_size()
        self.vocab_size = n
        pieces = [self.sp.id_to_piece(i) for i in range(n)]
        self.pieces = pieces
        for name in (CLS_PIECE, SEP_PIECE, MASK_PIECE):
            if self.sp.piece_to_id(name) == UNK_ID:
                raise ValueError(f"vocabulary has no {name} control symbol: train it with `albert vocab`")
        if self.sp.pad_id() != PAD_ID or self.sp.unk_id() != UNK_ID:
            raise ValueError(
                f"vocabulary must have pad=0 and unk=1 (has pad={self.sp.pad_id()} unk={self.sp.unk_id()})"
            )
        self.cls_id = self.sp.piece_to_id(CLS_PIECE)
        self.sep_id = self.sp.piece_to_id(SEP_PIECE)
        self.mask_id = self.sp.piece_to_id(MASK_PIECE)
        special = np.array(
            [self.sp.is_control(i) or self.sp.is_unknown(i) or self.sp.is_unused(i) for i in range(n)],
            dtype=bool,
        )
        self.piece_class = np.array(
            [CLASS_SPECIAL if special[i] else piece_class(p) for i, p in enumerate(pieces)], np.int8
        )
        # Surface length in characters ("▁" stands for one space); 0 for control pieces.
        self.piece_len = np.array([0 if special[i] else len(p) for i, p in enumerate(pieces)], dtype=np.int32)
        starts_ws = np.array([p.startswith("▁") for p in pieces], dtype=bool)
        self.sp_word_start = starts_ws | (self.piece_class == CLASS_CJK) | (self.piece_class == CLASS_PUNCT)
        # Random replacements (the 10% case) come from ordinary pieces only: never pad/unk/[CLS]/[SEP]/
        # [MASK], never the bare "▁".
        ordinary = ~special & (np.array(pieces) != "▁")
        self.ordinary_ids = np.flatnonzero(ordinary).astype(np.int32)
        # Fast path: single characters that are user-defined pieces (score exactly 0, not control) are
        # always cut out alone by SentencePiece, so they map to their id by a table lookup per code
        # point; only the runs between them (Latin words, digits, spaces) go through SentencePiece.
        # (A character inside a longer piece is not cut out alone: checked, not assumed.)
        in_longer = {c for i, p in enumerate(pieces) if len(p) > 1 and not special[i] for c in p}
        atomic = [
            (ord(p), i)
            for i, p in enumerate(pieces)
            if len(p) == 1
            and p != "▁"
            and not special[i]
            and self.sp.get_score(i) == 0.0
            and p not in in_longer
        ]
        # A space followed by a table character is the lone "▁" piece (no piece holds a table
        # character): with compiled normalization, every sentence that starts with one has it.
        self.space_id = self.sp.piece_to_id("▁") if "▁" in pieces else None
        self.char_table: np.ndarray | None = None
        if atomic:
            table = np.full(max(c for c, _ in atomic) + 2, -1, dtype=np.int32)
            for c, i in atomic:
                table[c] = i
            table[ord("\n")] = _SENTENCE_BREAK
            self.char_table = table
            self._sentinel = chr(atomic[0][0])
            self._run_cache: dict[str, list[int]] = {}
            self._context_runs: set[str] = set()

    @classmethod
    def load(cls, path: str) -> Tokenizer:
        """Load `spm.model` from a file path or fsspec URL, or from a vocab folder holding it.

        Every failure is a one-line UserError naming the file. A model beside the manifest of
        `albert vocab` must have the sha256 recorded there: a model file cut at a piece boundary still
        parses (as a model with fewer pieces and SentencePiece's default normalisation), so parsing
        alone cannot tell a damaged copy."""
        from core import storage

        if not path.endswith(".model"):
            path = storage.join(path, "spm.model")
        if not storage.isfile(path):
            raise UserError(f"{path} not found: train a vocabulary with `albert vocab --out DIR`")
        proto = storage.read_bytes(path)
        _check_against_vocab_manifest(path, proto)
        try:
            return cls(proto)
        except RuntimeError:  # SentencePiece's parser: "INTERNAL: ... ParseFromArray ..."
            raise UserError(
                f"{path} is not a SentencePiece model (corrupt or truncated): copy it again, or train "
                f"a new one with `albert vocab --out DIR`"
            ) from None
        except ValueError as err:  # parsed, but not a vocabulary with ALBERT's conventions
            raise UserError(f"{path}: {err}") from None

    def encode(self, text: str) -> np.ndarray:
        """Raw text -> piece ids, as training and fine-tuning tokenize it (no [CLS]/[SEP])."""
        norm = self.normalizer.one(text)
        if not norm.strip():
            return np.zeros(0, dtype=np.int32)
        return self.encode_document("text", [norm], "none").ids

    def encode_document(
        self,
        doc_id: str,
        sentences: list[str],
        whole_word: WholeWord = "zh",
        words: list[list[str]] | None = None,
    ) -> EncodedDoc:
        """Tokenize one document of already-normalized (`self.normalizer`), non-empty sentences.

        For `gold`, `words[k]` are the words of sentence k (their concatenation is the sentence)."""
        text = "\n".join(sentences)
        if self.char_table is not None:
            ids, offsets, counts = self._encode_fast(text)
        else:
            ids, offsets, counts = self._encode_sentences(sentences)
        sent_starts = np.zeros(len(counts) + 1, dtype=np.int32)
        np.cumsum(counts, out=sent_starts[1:])
        cls_ = self.piece_class[ids]
        word_start = self.sp_word_start[ids]
        # A change of script class starts a word ("用" then "NLP"), and so does every sentence start.
        word_start[1:] |= cls_[1:] != cls_[:-1]
        if whole_word == "none":
            word_start[:] = True
        elif whole_word in ("zh", "gold"):
            cjk = cls_ == CLASS_CJK
            inner = cjk.copy()
            inner[0] = False
            inner[1:] &= cjk[:-1]  # a CJK piece after a CJK piece: the segmenter decides
            if inner.any():
                char_ws = self._char_word_starts(text, sentences, whole_word, words)
                word_start[inner] = char_ws[offsets[inner]]
        word_start[sent_starts[:-1][counts > 0]] = True
        return EncodedDoc(doc_id, ids, sent_starts, word_start)

    def _run_lengths(
        self, run_ids: list[list[int]], runs: list[str], known: dict | None = None
    ) -> np.ndarray:
        """Surface length of every piece of every run (runs holding an unknown piece re-encoded;
        `known`: {run: (ids, lengths)} already measured)."""
        flat = np.fromiter(itertools.chain.from_iterable(run_ids), dtype=np.int32)
        lengths = self.piece_len[flat]
        if (flat == UNK_ID).any():
            pos = 0
            for r, ids in enumerate(run_ids):
                if known and r in known:
                    lengths[pos : pos + len(ids)] = known[r][1]
                elif UNK_ID in ids:
                    surfaces = self.seg.encode(runs[r], out_type=str)
                    if self.char_table is not None:
                        surfaces = surfaces[1:-1]  # the run's sentinels
                    lengths[pos : pos + len(ids)] = [len(p) for p in surfaces]
                pos += len(ids)
        return lengths

    def _encode_runs(self, runs: list[str]) -> tuple[list[list[int]], bool]:
        """Ids of sentinel-wrapped runs (sentinels dropped), and whether any run's segmentation may
        depend on what precedes it in its sentence (see `_commuting`; those runs are in
        `self._context_runs`). Memoised: runs such as numbers, years and common Latin words repeat a
        lot, and a dictionary hit is far cheaper than a SentencePiece call."""
        cache = self._run_cache
        missing = [r for r in set(runs) if r not in cache]
        if missing:
            if len(cache) + len(missing) > self.RUN_CACHE_LIMIT:
                cache.clear()
                self._context_runs.clear()
                missing = list(set(runs))  # this call's runs that were memoised went too
            # One thread: a thread pool per call costs more than these short runs take to encode.
            for r, ids in zip(missing, self.seg.encode(missing, num_threads=1)):
                cache[r] = ids[1:-1]
                if self._commuting(ids[1:-1]):
                    self._context_runs.add(r)
        return [cache[r] for r in runs], bool(self._context_runs) and not self._context_runs.isdisjoint(runs)

    def _commuting(self, ids: list[int]) -> bool:
        """True when two adjacent pieces commute ("1" "11" spells what "11" "1" spells). Such
        segmentations tie exactly, and SentencePiece breaks the tie by float rounding of the score
        accumulated since the start of the sentence: the run must be segmented in its sentence."""
        return any(
            a != b and (p := self.pieces[a]) + (q := self.pieces[b]) == q + p for a, b in zip(ids, ids[1:])
        )

    def _runs_in_context(self, text: str, run_start: np.ndarray, run_end: np.ndarray, which: list[int]):
        """Ids of runs `which`, cut from the segmentation of their whole sentence: atomic characters
        are always pieces of their own, so the sentence's pieces either lie inside a run or outside."""
        out = {}
        for r in which:
            a, b = int(run_start[r]), int(run_end[r])
            s0 = text.rfind("\n", 0, a) + 1
            s1 = text.find("\n", b)
            s1 = len(text) if s1 < 0 else s1
            ids = self.seg.encode(text[s0:s1])
            lengths = [len(p) for p in self.seg.encode(text[s0:s1], out_type=str)]
            pos = (s0 + np.cumsum([0] + lengths[:-1])).tolist()
            inside = [k for k, at in enumerate(pos) if a <= at < b]
            out[r] = ([ids[k] for k in inside], [lengths[k] for k in inside])
        return out

    def _encode_fast(self, text: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(ids, character offset of each piece in `text`, pieces per sentence) via the char table."""
        cps = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
        table = self.char_table
        direct = np.where(cps < len(table), table[np.minimum(cps, len(table) - 1)], -1)
        if self.space_id is not None and len(direct) > 1:
            lone_space = np.zeros(len(direct), dtype=bool)
            lone_space[:-1] = (cps[:-1] == 32) & (direct[1:] >= 0)
            direct[lone_space] = self.space_id
        other = direct == -1
        # Runs of characters SentencePiece must segment: [run_start, run_end) character ranges.
        edges = np.flatnonzero(np.diff(np.concatenate(([False], other, [False])).astype(np.int8)))
        run_start, run_end = edges[0::2], edges[1::2]
        # Each run is encoded between two copies of a table character, exactly as it sits in its
        # sentence between two such characters: SentencePiece then neither strips a leading/trailing
        # space of the run nor segments it differently. The two sentinel pieces are dropped.
        x = self._sentinel
        runs = [x + text[a:b] + x for a, b in zip(run_start.tolist(), run_end.tolist())]
        run_ids, context = self._encode_runs(runs)
        found = {}
        if context:
            which = [r for r, run in enumerate(runs) if run in self._context_runs]
            found = self._runs_in_context(text, run_start, run_end, which)
            run_ids = [found[r][0] if r in found else ids for r, ids in enumerate(run_ids)]
        run_counts = np.fromiter(map(len, run_ids), dtype=np.int64, count=len(run_ids))
        # Pieces contributed by each character position: 1 for a table character, k for the first
        # character of a run of k pieces, 0 for the other run characters and for "\n".
        per_char = (direct >= 0).astype(np.int64)
        per_char[run_start] = run_counts
        first = np.cumsum(per_char) - per_char  # index of the first piece of each character position
        total = int(per_char.sum())
        ids = np.empty(total, dtype=np.int32)
        offsets = np.empty(total, dtype=np.int64)
        table_pos = np.flatnonzero(direct >= 0)
        ids[first[table_pos]] = direct[table_pos]
        offsets[first[table_pos]] = table_pos
        if len(run_ids):
            flat = np.fromiter(
                itertools.chain.from_iterable(run_ids), dtype=np.int32, count=int(run_counts.sum())
            )
            lengths = self._run_lengths(run_ids, runs, found)
            dest = np.repeat(first[run_start] - (np.cumsum(run_counts) - run_counts), run_counts)
            dest += np.arange(len(flat))
            ids[dest] = flat
            within = np.cumsum(lengths) - lengths  # offset of each piece inside the flat run text
            run_base = np.repeat(
                run_start - (np.cumsum(run_end - run_start) - (run_end - run_start)), run_counts
            )
            offsets[dest] = run_base + within
        breaks = np.flatnonzero(direct == _SENTENCE_BREAK)
        bounds = np.concatenate(([0], first[breaks], [total]))
        return ids, offsets, np.diff(bounds)

    def _encode_sentences(self, sentences: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The general path (any vocabulary): SentencePiece on whole sentences."""
        pieces = self.seg.encode(sentences, num_threads=1)
        counts = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
        ids = np.fromiter(itertools.chain.from_iterable(pieces), dtype=np.int32, count=int(counts.sum()))
        lengths = self._run_lengths(pieces, sentences)
        # offset in "\n".join(sentences): within-sentence cumulative length + one "\n" per sentence before
        sent_char_start = np.cumsum([0] + [len(s) + 1 for s in sentences[:-1]])
        within = np.cumsum(lengths) - lengths
        sent_tok_start = np.cumsum(counts) - counts
        offsets = within - np.repeat(
            within[np.minimum(sent_tok_start, len(within) - 1)] if len(within) else [], counts
        )
        offsets = offsets + np.repeat(sent_char_start, counts)
        return ids, offsets.astype(np.int64), counts

    @staticmethod
    def _char_word_starts(
        text: str, sentences: list[str], whole_word: str, words: list[list[str]] | None
    ) -> np.ndarray:
        """Boolean per character of `text` = "\n".join(sentences): True where a segmenter word starts."""
        if whole_word == "gold":
            if words is None or len(words) != len(sentences):
                raise ValueError("whole_word='gold' needs the document's words, one list per sentence")
            seq = []
            for k, ws in enumerate(words):
                if k:
                    seq.append("\n")
                seq.extend(ws)
        else:
            import rjieba

            seq = rjieba.cut(text)
        lengths = np.fromiter(map(len, seq), dtype=np.int64, count=len(seq))
        total = int(lengths.sum())
        char_ws = np.zeros(total + 1, dtype=bool)
        char_ws[np.cumsum(lengths) - lengths] = True
        return char_ws


def _check_against_vocab_manifest(path: str, proto: bytes) -> None:
    """UserError when `path` sits in a folder written by `albert vocab` whose manifest records
    another sha256 for it (the file was damaged or replaced after the vocabulary was trained)."""
    import hashlib

    from core import storage

    folder = storage.dirname(path)
    manifest_path = storage.join(folder, "manifest.json")
    if not storage.exists(manifest_path):
        return
    try:
        manifest = storage.read_json(manifest_path)
        expected = manifest["outputs"][storage.basename(path)] if manifest["stage"] == "vocab" else None
    except (ValueError, KeyError, TypeError):
        return  # not a vocabulary folder (a checkpoint, a registry version): nothing recorded to check
    if expected and hashlib.sha256(proto).hexdigest() != expected:
        raise UserError(
            f"{path} is damaged or was replaced: its sha256 is not the one in {manifest_path}; "
            f"copy the vocabulary folder again, or train a new one with `albert vocab --out DIR`"
        )

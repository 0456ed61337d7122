"""Prepared documents of one input file -> groups: the unit the instance stage tokenizes, packs, masks
and writes (one TFRecord file per group and dupe index). Pure; no Beam.

A group takes consecutive documents of its split until it holds `group_chars` characters
(InstanceConfig.group_chars). A worker holds a whole group, tokenized, with all its instances, so no
document may make a group unbounded: a document longer than `group_chars` is cut, at sentence ends,
into pieces that each fill a group (the first one what the group being filled can still take), and
each piece is a document of its own for packing, with the id `<id>#<k>` (k = 0, 1, ...). A sentence
itself longer than `group_chars` (a text file without line breaks) is first cut every `group_chars`
characters, or at word ends for `--whole-word gold` (a single word longer than that stays whole). A
group then holds less than `group_chars` plus one sentence: fewer than 2 * group_chars characters.

Documents within the cap are untouched (same ids, same groups: the output is what it was before the
cap). The pieces of a document all go to the split of the document's own id, the document is counted
once (`Group.documents`), and the cuts are counted in the group's notes:

    documents_split_at_cap   documents longer than the cap     document_pieces_at_cap   their pieces
    sentences_cut_at_cap     sentences longer than the cap     sentence_pieces_at_cap   their pieces
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from pipelines.instance_builder import InstanceConfig, PreparedDoc, split_of


@dataclass
class Group:
    file_index: int
    split: str
    index: int
    docs: list[PreparedDoc]
    notes: dict  # repairs and cuts counted while preparing these documents
    continued: int = 0
    """Pieces in `docs` after the first piece of their document (the document counts once)."""

    @property
    def documents(self) -> int:
        """Documents of the input that start in this group."""
        return len(self.docs) - self.continued


def cut_sentence(
    sentence: str, words: list[str] | None, max_chars: int
) -> list[tuple[str, list[str] | None]]:
    """A sentence longer than max_chars as consecutive (text, words) pieces of at most max_chars
    characters: cut every max_chars characters, or, with gold `words`, at the word ends (the words of
    a piece spell it)."""
    if words is None:
        return [(sentence[i : i + max_chars], None) for i in range(0, len(sentence), max_chars)]
    pieces, current, size = [], [], 0
    for word in words:
        if current and size + len(word) > max_chars:
            pieces.append(("".join(current), current))
            current, size = [], 0
        current.append(word)
        size += len(word)
    if current:
        pieces.append(("".join(current), current))
    return pieces


def split_document(
    doc: PreparedDoc, max_chars: int, notes: Counter, room: int | None = None
) -> list[PreparedDoc]:
    """[doc] when it holds at most max_chars characters; else its pieces, in order, the cuts counted in
    `notes`. A piece ends at the first sentence end where it reaches its target: `room` (what the
    group being filled can still take; default max_chars) for the first piece, max_chars for the next;
    the last piece is what remains."""
    if doc.chars <= max_chars:
        return [doc]
    sentences: list[str] = []
    words: list[list[str] | None] = []
    for k, sentence in enumerate(doc.sentences):
        gold = doc.words[k] if doc.words is not None else None
        if len(sentence) <= max_chars:
            sentences.append(sentence)
            words.append(gold)
            continue
        cut = cut_sentence(sentence, gold, max_chars)
        notes["sentences_cut_at_cap"] += 1
        notes["sentence_pieces_at_cap"] += len(cut)
        sentences += [text for text, _ in cut]
        words += [w for _, w in cut]
    bounds, start, size, target = [], 0, 0, room or max_chars  # [start, end) sentences of the pieces
    for k, sentence in enumerate(sentences):
        size += len(sentence)
        if size >= target:
            bounds.append((start, k + 1))
            start, size, target = k + 1, 0, max_chars
    if start < len(sentences):
        bounds.append((start, len(sentences)))
    if len(bounds) == 1:  # only its last sentence reaches the target: it fills the group whole
        if len(sentences) == len(doc.sentences):
            return [doc]
        return [PreparedDoc(doc.id, sentences, words if doc.words is not None else None, doc.chars)]  # type: ignore[arg-type]
    notes["documents_split_at_cap"] += 1
    notes["document_pieces_at_cap"] += len(bounds)
    return [
        PreparedDoc(
            f"{doc.id}#{n}",
            sentences[a:b],
            words[a:b] if doc.words is not None else None,  # type: ignore[arg-type]
            sum(map(len, sentences[a:b])),
        )
        for n, (a, b) in enumerate(bounds)
    ]


class Grouper:
    """Consecutive prepared documents of one input file -> Groups, per split, in order:

    grouper = Grouper(file_index, config)
    for doc, notes in prepared: yield from grouper.add(doc, notes)
    yield from grouper.finish()
    """

    def __init__(self, file_index: int, config: InstanceConfig):
        self.file_index = file_index
        self.group_chars = config.group_chars
        self.eval_fraction = config.eval_fraction
        self.pending: dict[str, list[PreparedDoc]] = {"train": [], "eval": []}
        self.chars = {"train": 0, "eval": 0}
        self.count = {"train": 0, "eval": 0}
        self.continued = {"train": 0, "eval": 0}
        self.notes = {"train": Counter(), "eval": Counter()}

    def add(self, doc: PreparedDoc, notes: Counter) -> Iterator[Group]:
        """Add one document (its repairs counted in `notes`); yields the groups it completes."""
        split = split_of(doc.id, self.eval_fraction)  # the document's id: all its pieces go together
        pieces = split_document(doc, self.group_chars, notes, self.group_chars - self.chars[split])
        self.notes[split].update(notes)
        for k, piece in enumerate(pieces):
            self.pending[split].append(piece)
            self.chars[split] += piece.chars
            self.continued[split] += k > 0
            if self.chars[split] >= self.group_chars:
                yield self._take(split)

    def finish(self) -> Iterator[Group]:
        """The last, partly filled group of each split."""
        for split in ("train", "eval"):
            if self.pending[split]:
                yield self._take(split)

    def _take(self, split: str) -> Group:
        group = Group(
            self.file_index,
            split,
            self.count[split],
            self.pending[split],
            dict(self.notes[split]),
            self.continued[split],
        )
        self.count[split] += 1
        self.pending[split], self.chars[split], self.continued[split] = [], 0, 0
        self.notes[split] = Counter()
        return group

"""The People's Daily NER task (model/ner_data.py) as token-classification items: characters ->
the checkpoint's pieces with a label per piece, and piece predictions back to one BIO tag per
character.

Alignment. A text is cut into pieces exactly as pretraining cut it (the Tokenizer's ids, checked
piece for piece), and every piece is tied to the span of ORIGINAL characters it came from, as
SentencePiece reports it: normalization may turn one character into several (… -> ...) or merge a
full-width digit run into one piece (１９９８ -> "1998"), so positions in the normalized text are not
positions in the example. Pieces whose spans overlap form one *unit*; units partition the characters
(a character no piece covers, e.g. one the normalization drops, joins the unit before it). With the
vocabularies of `albert vocab` every CJK character and punctuation mark is a unit of its own; a
Latin or digit run may be one unit of several characters. A unit is the smallest thing the model
labels: its first piece carries the tag of its first character, every other piece (and [CLS],
[SEP]) the label -100, which the loss ignores. Back from predictions, a unit's tag goes to its first
character and its continuation (I- of the type, or O) to the others. An entity whose start or end
falls inside a unit cannot be predicted exactly: `alignment_summary` measures that ceiling.

Windows. An example of more than max_seq_length - 2 pieces is cut into consecutive windows at unit
boundaries (each window a sequence of its own); the predictions of its windows are merged back per
character. Nothing is truncated: every character of every example gets a tag.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from core.errors import UserError
from model.finetune_data import Encoder, padded_length
from model.ner_data import BIO_TAGS, NerExample, entity_counts, entity_scores, entity_spans

LABEL_OF_TAG = {tag: i for i, tag in enumerate(BIO_TAGS)}
IGNORED = -100  # the label cross-entropy skips (torch's ignore_index)


@dataclass(frozen=True)
class TokenItem:
    """One window of one example, ready for the model. U units; position 0 is [CLS]."""

    example: int  # index of the example in the list encoded
    input_ids: np.ndarray  # (L,) int64: [CLS] pieces [SEP]
    labels: np.ndarray  # (L,) int64: a BIO_TAGS index on each unit's first piece, IGNORED elsewhere
    unit_positions: np.ndarray  # (U,) position in input_ids of each unit's first piece
    unit_starts: np.ndarray  # (U,) the unit's first character (index into the example's chars)
    unit_ends: np.ndarray  # (U,) one past its last character


def units_of(spans: list[tuple[int, int]]) -> tuple[list[int], list[int]]:
    """Piece spans (begin, end) over the characters -> (index of each unit's first piece, each unit's
    first character). A zero-width piece (the dummy-prefix "▁") is in no unit; pieces that overlap
    are one unit; the first unit starts at character 0 (what no piece covers joins the unit before)."""
    first_pieces: list[int] = []
    starts: list[int] = []
    end = 0  # one past the last character of the current unit
    for piece, (begin, stop) in enumerate(spans):
        if stop <= begin:
            continue
        if starts and begin < end:  # overlaps the current unit (two pieces of one character)
            end = max(end, stop)
            continue
        first_pieces.append(piece)
        starts.append(begin)
        end = stop
    if starts:
        starts[0] = 0
    return first_pieces, starts


def unit_tags_to_chars(unit_tags: list[str], starts: list[int], ends: list[int], tags: list[str]) -> None:
    """Write each unit's tag on its first character and its continuation on the others, in `tags`."""
    for tag, start, end in zip(unit_tags, starts, ends):
        tags[start] = tag
        inside = "O" if tag == "O" else f"I-{tag.partition('-')[2]}"
        for position in range(start + 1, end):
            tags[position] = inside


class NerEncoder:
    """NerExamples -> TokenItems with the checkpoint's spm.model (module docstring)."""

    def __init__(self, spm_path: str, max_seq_length: int):
        if max_seq_length < 3:
            raise UserError(f"--max-seq-length {max_seq_length}: NER needs at least 3 ([CLS] a piece [SEP])")
        # The checkpoint's spm.model, loaded and checked as classification loads it.
        self.tok = Encoder(spm_path, max_seq_length).tok
        self.max_seq_length = max_seq_length

    def pieces(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """The ids pretraining gives `text` and each piece's span of characters of `text`."""
        tok = self.tok
        if tok.normalizer.compiled:  # SentencePiece normalizes and reports spans in the raw text
            proto = tok.sp.encode(text, out_type="immutable_proto")
            ids = [p.id for p in proto.pieces]
            spans = [(p.begin, p.end) for p in proto.pieces]
        else:  # an identity vocabulary: the Python rules, character by character, then SentencePiece
            from core.tokenizer_normalizer import normalize

            owner: list[int] = []  # normalized character -> the original character it came from
            for position, char in enumerate(text):
                owner.extend([position] * len(normalize(char)))
            normalized = "".join(normalize(char) for char in text)
            if normalized != tok.normalizer.one(text):
                raise UserError(
                    f"cannot align {text[:40]!r}: its normalization is not character by character"
                )
            proto = tok.sp.encode(normalized, out_type="immutable_proto")
            ids = [p.id for p in proto.pieces]
            spans = [
                (owner[p.begin], owner[p.end - 1] + 1) if p.end > p.begin else (0, 0) for p in proto.pieces
            ]
        if ids != tok.encode(text).tolist():
            raise UserError(f"cannot align {text[:40]!r}: its pieces differ from the tokenizer's")
        return ids, spans

    def encode(self, examples: list[NerExample]) -> list[TokenItem]:
        """The windows of every example, in order (an example's windows are consecutive)."""
        items: list[TokenItem] = []
        budget = self.max_seq_length - 2
        for index, example in enumerate(examples):
            ids, spans = self.pieces("".join(example.chars))
            first_pieces, starts = units_of(spans)
            ends = [*starts[1:], len(example.chars)]
            labels = np.full(len(ids), IGNORED, dtype=np.int64)
            labels[first_pieces] = [LABEL_OF_TAG[example.tags[start]] for start in starts]
            # Window cuts: at unit first pieces, as late as the budget allows.
            cuts, begin = [0], 0
            while len(ids) - begin > budget:
                fits = [p for p in first_pieces if begin < p <= begin + budget]
                if not fits:
                    raise UserError(
                        f"{example.id}: a character span of over {budget} pieces; raise --max-seq-length"
                    )
                begin = fits[-1]
                cuts.append(begin)
            cuts.append(len(ids))
            units = np.array(first_pieces, dtype=np.int64)
            for begin, end in zip(cuts, cuts[1:]):
                inside = np.flatnonzero((units >= begin) & (units < end))
                items.append(
                    TokenItem(
                        example=index,
                        input_ids=np.array(
                            [self.tok.cls_id, *ids[begin:end], self.tok.sep_id], dtype=np.int64
                        ),
                        labels=np.concatenate([[IGNORED], labels[begin:end], [IGNORED]]),
                        unit_positions=units[inside] - begin + 1,
                        unit_starts=np.array(starts, dtype=np.int64)[inside],
                        unit_ends=np.array(ends, dtype=np.int64)[inside],
                    )
                )
        return items


def collate_tokens(items: list[TokenItem], multiple: int = 1) -> dict[str, torch.Tensor]:
    """Pad to the longest item of the batch, rounded up to a multiple of `multiple`; padded labels are
    IGNORED."""
    length = padded_length(max(len(item.input_ids) for item in items), multiple)
    ids = np.zeros((len(items), length), np.int64)
    mask = np.zeros((len(items), length), np.int64)
    labels = np.full((len(items), length), IGNORED, np.int64)
    for row, item in enumerate(items):
        n = len(item.input_ids)
        ids[row, :n], mask[row, :n], labels[row, :n] = item.input_ids, 1, item.labels
    return {
        "input_ids": torch.from_numpy(ids),
        "token_type_ids": torch.zeros_like(torch.from_numpy(ids)),
        "attention_mask": torch.from_numpy(mask),
        "labels": torch.from_numpy(labels),
    }


def tags_from_units(
    items: list[TokenItem], unit_labels: list[np.ndarray], examples: list[NerExample]
) -> list[list[str]]:
    """Label ids per unit of each item (BIO_TAGS indexes) -> one BIO tag per character of every example.
    Characters of no unit (an example without a piece) are O."""
    tags = [["O"] * len(example.chars) for example in examples]
    for item, labels in zip(items, unit_labels):
        unit_tags = [BIO_TAGS[label] for label in labels]
        unit_tags_to_chars(unit_tags, item.unit_starts.tolist(), item.unit_ends.tolist(), tags[item.example])
    return tags


def alignment_summary(items: list[TokenItem], examples: list[NerExample], max_seq_length: int) -> dict:
    """How well pieces fit the task: windows made, units of several characters, and the ceiling, the
    gold tags put through the units and back (what a model that labels every unit right scores)."""
    gold = [example.tags for example in examples]
    through_units = tags_from_units(items, [item.labels[item.unit_positions] for item in items], examples)
    boundaries = [set() for _ in examples]  # character positions where a unit starts or ends
    for item in items:
        boundaries[item.example].update(item.unit_starts.tolist(), item.unit_ends.tolist())
    spans = [(i, span) for i, tags in enumerate(gold) for span in entity_spans(tags)]
    windows = np.bincount([item.example for item in items], minlength=len(examples))
    return {
        "max_seq_length": max_seq_length,
        "examples": len(examples),
        "windows": len(items),
        "examples_in_several_windows": int((windows > 1).sum()),
        "pieces": int(sum(len(item.input_ids) - 2 for item in items)),
        "characters": sum(len(example.chars) for example in examples),
        "multi_character_units": int(sum(((item.unit_ends - item.unit_starts) > 1).sum() for item in items)),
        "entities": len(spans),
        "entities_on_unit_boundaries": sum(
            start in boundaries[i] and end in boundaries[i] for i, (_, start, end) in spans
        ),
        "ceiling": entity_scores(entity_counts(gold, through_units)),
    }

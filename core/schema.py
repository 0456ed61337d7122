"""The pretraining-instance schema: the ONE definition that the Beam pipelines (writers) and the
PyTorch data loader (reader) both import.

It is exactly the schema of google-research/albert's `create_pretraining_data.py` output, read there
with `tf.io.FixedLenFeature`. L = max_seq_length, P = max_predictions_per_seq; every feature has a fixed
length and is padded with 0.

This module imports neither TensorFlow, Beam nor torch: `tf_parse_spec` imports TensorFlow lazily.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# Special-token conventions of the vocabulary (pipelines.vocab trains models with exactly these).
PAD_ID = 0
UNK_ID = 1
CLS_PIECE = "[CLS]"
SEP_PIECE = "[SEP]"
MASK_PIECE = "[MASK]"
CONTROL_PIECES = (CLS_PIECE, SEP_PIECE, MASK_PIECE)

DEFAULT_MAX_SEQ_LENGTH = 512
DEFAULT_MAX_PREDICTIONS = 77  # round(0.15 * 512) = 77: the full 15% budget at L=512


@dataclass(frozen=True)
class Feature:
    name: str
    dtype: Literal["int64", "float32"]
    length: Literal["seq", "pred", "one"]  # L, P or 1
    doc: str


FEATURES: tuple[Feature, ...] = (
    Feature("input_ids", "int64", "seq", "[CLS] A [SEP] B [SEP], then 0-padding"),
    Feature("input_mask", "int64", "seq", "1 on real tokens, 0 on padding"),
    Feature("segment_ids", "int64", "seq", "0 up to and including the first [SEP], 1 after"),
    Feature("token_boundary", "int64", "seq", "1 where a whole word starts (and on [CLS]/[SEP])"),
    Feature("masked_lm_positions", "int64", "pred", "positions of the predicted tokens, ascending"),
    Feature("masked_lm_ids", "int64", "pred", "the ORIGINAL token id at each position"),
    Feature("masked_lm_weights", "float32", "pred", "1.0 for a real prediction, 0.0 for padding"),
    Feature("next_sentence_labels", "int64", "one", "SOP label: 0 = A then B (natural order), 1 = swapped"),
)
FEATURE_NAMES = tuple(f.name for f in FEATURES)


def feature_lengths(max_seq_length: int, max_predictions: int) -> dict[str, int]:
    """Fixed length of every feature for the given L and P."""
    by_kind = {"seq": max_seq_length, "pred": max_predictions, "one": 1}
    return {f.name: by_kind[f.length] for f in FEATURES}


def tf_parse_spec(max_seq_length: int, max_predictions: int) -> dict:
    """The `tf.io.FixedLenFeature` spec the original ALBERT trainer parses records with."""
    import tensorflow as tf  # lazy: 4 s import, and workers that only write records never need it

    lengths = feature_lengths(max_seq_length, max_predictions)
    dtypes = {"int64": tf.int64, "float32": tf.float32}
    return {f.name: tf.io.FixedLenFeature([lengths[f.name]], dtypes[f.dtype]) for f in FEATURES}

"""Pretraining instances (TFRecord, original ALBERT schema) -> batches of torch tensors, without
TensorFlow.

    examples.py  tf.train.Example bytes -> numpy arrays / torch tensors (vectorised over a batch)
    records.py   TFRecord files read from a byte offset (core.tfrecord's framing)
    folders.py   instance folders: a split's files, checked against manifest.json and the vocabulary
    stream.py    the deterministic sharded stream: batches of one rank, each with its resume Position
"""

from model.data.examples import RecordError, decode_varints, infer_lengths, parse_examples, to_torch
from model.data.folders import InstanceFiles, NoSplit, check_vocab, find_instances
from model.data.records import iter_records
from model.data.stream import InstanceStream, Position, make_loader

__all__ = [
    "InstanceFiles",
    "InstanceStream",
    "NoSplit",
    "Position",
    "RecordError",
    "check_vocab",
    "decode_varints",
    "find_instances",
    "infer_lengths",
    "iter_records",
    "make_loader",
    "parse_examples",
    "to_torch",
]

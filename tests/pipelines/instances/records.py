"""The records of an instance run, parsed by TensorFlow with the original fixed-length spec."""

from __future__ import annotations

import glob
import os

import pytest

from core.schema import tf_parse_spec
from core.tfrecord import read_records
from tests.pipelines.instances.fixtures import L, P

tf = pytest.importorskip("tensorflow")


def parse_dir(out, split="train"):
    spec = tf_parse_spec(L, P)
    records = []
    for path in sorted(glob.glob(os.path.join(out, f"{split}-*.tfrecord"))):
        for raw in read_records(open(path, "rb").read()):
            records.append({k: v.numpy() for k, v in tf.io.parse_single_example(raw, spec).items()})
    return records

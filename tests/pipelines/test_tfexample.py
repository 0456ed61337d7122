"""Our hand-written tf.train.Example/TFRecord bytes parse with TensorFlow and the original spec."""

from __future__ import annotations

import numpy as np
import pytest

from core.schema import FEATURES, feature_lengths, tf_parse_spec
from core.tfrecord import frame_record
from pipelines.tfexample import encode_examples, encode_varints

tf = pytest.importorskip("tensorflow")


def random_features(rng, batch, L, P, vocab=30000):
    lengths = feature_lengths(L, P)
    out = {}
    for f in FEATURES:
        if f.dtype == "float32":
            out[f.name] = rng.random((batch, lengths[f.name])).astype(np.float32)
        else:
            high = {"input_ids": vocab, "masked_lm_ids": vocab, "masked_lm_positions": L}.get(f.name, 2)
            out[f.name] = rng.integers(0, high, (batch, lengths[f.name]))
    return out


def test_examples_parse_with_the_original_fixed_length_spec(tmp_path):
    rng = np.random.default_rng(0)
    L, P = 512, 77
    feats = random_features(rng, 16, L, P)
    feats["input_ids"][0, :3] = [0, 127, 2**31]  # varint edge cases: 1 byte, 1 byte, 5 bytes
    examples = encode_examples(feats)
    path = tmp_path / "x.tfrecord"
    path.write_bytes(b"".join(frame_record(e) for e in examples))
    spec = tf_parse_spec(L, P)
    parsed = [tf.io.parse_single_example(r, spec) for r in tf.data.TFRecordDataset(str(path))]
    assert len(parsed) == 16
    for i, p in enumerate(parsed):
        for name, values in feats.items():
            got = p[name].numpy()
            assert got.dtype == (np.float32 if name == "masked_lm_weights" else np.int64)
            np.testing.assert_array_equal(got, values[i].astype(got.dtype))


def test_tensorflow_proto_reads_the_same_message():
    rng = np.random.default_rng(1)
    feats = random_features(rng, 2, 16, 4)
    ex = tf.train.Example.FromString(encode_examples(feats)[0])
    assert list(ex.features.feature["input_ids"].int64_list.value) == feats["input_ids"][0].tolist()
    assert set(ex.features.feature.keys()) == {f.name for f in FEATURES}


def test_varints_match_protobuf_encoding():
    values = np.array([[0, 1, 127, 128, 300, 16383, 16384, 2**21, 2**35]])
    flat, nbytes = encode_varints(values)
    msg = tf.train.Int64List(value=values[0].tolist()).SerializeToString()
    assert msg[2:] == flat.tobytes() and nbytes[0] == len(msg) - 2  # skip the field key and length

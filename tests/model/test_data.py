"""The TFRecord loader: parsing equals TensorFlow's, shards and workers split the stream exactly,
seeded shuffling, and a saved position resumes the stream exactly."""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest
import torch

from core.errors import UserError
from core.schema import FEATURES, feature_lengths
from core.tfrecord import frame_record
from model.data import (
    InstanceFiles,
    InstanceStream,
    Position,
    RecordError,
    decode_varints,
    find_instances,
    infer_lengths,
    iter_records,
    make_loader,
    parse_examples,
)
from pipelines.tfexample import encode_examples
from tests.model.tiny import TINY_MODEL

L, P = 32, 5


def random_features(rng, batch, L=L, P=P, vocab=30000):
    lengths = feature_lengths(L, P)
    out = {}
    for f in FEATURES:
        if f.dtype == "float32":
            out[f.name] = rng.random((batch, lengths[f.name])).astype(np.float32)
        else:
            high = {"input_ids": vocab, "masked_lm_ids": vocab, "masked_lm_positions": L}.get(f.name, 2)
            out[f.name] = rng.integers(0, high, (batch, lengths[f.name]))
    return out


def write_file(path, records):
    with open(path, "wb") as f:
        f.write(b"".join(frame_record(r) for r in records))
    return str(path)


def numbered_files(tmp_path, counts, L=L, P=P):
    """Files whose records carry their global number (in file order) in input_ids[0]."""
    rng = np.random.default_rng(0)
    paths, k = [], 0
    for i, n in enumerate(counts):
        feats = random_features(rng, n, L, P)
        feats["input_ids"][:, 0] = np.arange(k, k + n)
        k += n
        paths.append(write_file(tmp_path / f"train-{i:05d}.tfrecord", encode_examples(feats)))
    return InstanceFiles(tuple(paths), L, P)


def ids_of(batches):
    return [b["input_ids"][:, 0].tolist() for b, _ in batches]


def take(it, n):
    return [x for _, x in zip(range(n), it)]


# ------------------------------------------------------------------------------------------ parsing


def test_parse_equals_tensorflow_on_our_records():
    tf = pytest.importorskip("tensorflow")
    from core.schema import tf_parse_spec

    rng = np.random.default_rng(1)
    feats = random_features(rng, 20)
    feats["input_ids"][0, :4] = [0, 127, 128, 2**31]  # 1, 1, 2 and 5-byte varints
    records = encode_examples(feats)
    got = parse_examples(records, feature_lengths(L, P))
    spec = tf_parse_spec(L, P)
    for i, r in enumerate(records):
        ref = tf.io.parse_single_example(r, spec)
        for name in ref:
            np.testing.assert_array_equal(got[name][i], ref[name].numpy())
            assert got[name].dtype == ref[name].numpy().dtype


def test_parse_equals_tensorflow_on_records_tensorflow_wrote():
    """The original generator's records: serialised by TF's protobuf, map order not the schema's."""
    tf = pytest.importorskip("tensorflow")
    rng = np.random.default_rng(2)
    feats = random_features(rng, 6)
    records = []
    for i in range(6):
        names = [f.name for f in FEATURES]
        rng.shuffle(names)
        feature = {}
        for n in names:
            v = feats[n][i]
            feature[n] = (
                tf.train.Feature(float_list=tf.train.FloatList(value=v.tolist()))
                if v.dtype == np.float32
                else tf.train.Feature(int64_list=tf.train.Int64List(value=v.tolist()))
            )
        records.append(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    got = parse_examples(records, feature_lengths(L, P))
    for n in feats:
        np.testing.assert_array_equal(got[n], feats[n].astype(got[n].dtype))


def _key(field, wire):
    return bytes([(field << 3) | wire])


def _ld(field, payload):
    from pipelines.tfexample import _varint

    return _key(field, 2) + _varint(len(payload)) + payload


def test_unpacked_lists_and_unknown_fields_take_the_general_path():
    from pipelines.tfexample import _varint

    lengths = {"input_ids": 3, "masked_lm_weights": 2}
    ints = b"".join(_key(1, 0) + _varint(v) for v in (5, 300, 7))  # unpacked varints
    floats = b"".join(_key(1, 5) + np.float32(x).tobytes() for x in (0.5, 1.0))  # unpacked fixed32
    entry_ids = _ld(2, _ld(3, ints)) + _ld(1, b"input_ids")  # value before key, legal protobuf
    entry_w = _ld(1, b"masked_lm_weights") + _ld(2, _ld(2, floats))
    record = _ld(1, _ld(1, entry_ids) + _ld(1, entry_w)) + _key(2, 0) + _varint(9)  # unknown field 2
    got = parse_examples([record], lengths)
    assert got["input_ids"].tolist() == [[5, 300, 7]]
    assert got["masked_lm_weights"].tolist() == [[0.5, 1.0]]


def test_varints_decode_edge_values():
    from pipelines.tfexample import _varint

    values = [0, 1, 127, 128, 16383, 16384, 2**31, 2**63 - 1]
    data = b"".join(_varint(v) for v in values) + _varint(2**64 - 1)  # -1 as int64
    assert decode_varints(data).tolist() == values + [-1]
    with pytest.raises(RecordError):
        decode_varints(b"\x80\x80")  # truncated


def test_bad_records_are_named():
    rng = np.random.default_rng(3)
    good = encode_examples(random_features(rng, 3))
    short = encode_examples(random_features(rng, 1, L=L - 1))[0]
    with pytest.raises(RecordError, match="record 1: feature 'input_ids' has 31 values, expected 32"):
        parse_examples([good[0], short, good[1]], feature_lengths(L, P))
    with pytest.raises(RecordError, match="no feature 'nope'"):
        parse_examples(good, {"nope": 3})
    int_weights = _ld(1, _ld(1, _ld(1, b"masked_lm_weights") + _ld(2, _ld(3, _ld(1, b"\x01")))))
    with pytest.raises(RecordError, match="record 0: feature 'masked_lm_weights' is not a float32 list"):
        parse_examples([int_weights], {"masked_lm_weights": 1})
    assert infer_lengths(good[0]) == (L, P)


def test_corrupt_file_is_an_error_with_file_and_offset(tmp_path):
    rng = np.random.default_rng(4)
    path = write_file(tmp_path / "x.tfrecord", encode_examples(random_features(rng, 3)))
    blob = bytearray(open(path, "rb").read())
    first = 12 + int.from_bytes(blob[:8], "little") + 4
    blob[first + 20] ^= 0xFF  # inside the second record's data
    open(path, "wb").write(bytes(blob))
    with pytest.raises(RecordError, match=rf"x.tfrecord: corrupt record data at byte {first}"):
        list(iter_records(path))
    open(path, "wb").write(bytes(blob[: first + 30]))
    with pytest.raises(RecordError, match="truncated"):
        list(iter_records(path, verify=False))


def test_find_instances(tmp_path, instances_dir):
    data = find_instances(instances_dir, "train")
    assert (data.max_seq_length, data.max_predictions) == (64, 10)
    assert len(data.files) == 3 and data.vocab_model.endswith("spm.model")
    foreign = find_instances(os.path.join(instances_dir, "eval-*.tfrecord"))
    assert foreign.vocab_model is None and len(foreign.files) == 1
    (tmp_path / "half").mkdir()
    with pytest.raises(UserError, match="no manifest.json"):
        find_instances(str(tmp_path / "half"))


# ------------------------------------------------------------------------------------------ the stream


def test_one_epoch_yields_every_record_once_and_epochs_reshuffle(tmp_path):
    data = numbered_files(tmp_path, [7, 11, 5])
    stream = InstanceStream(data, 4, seed=1, shuffle_window=6)
    got = sum(ids_of(take(stream.batches(), 12)), [])  # 48 elements: two epochs of 23, then 2 more
    assert sorted(got[:23]) == list(range(23)) and sorted(got[23:46]) == list(range(23))
    assert got[:23] != list(range(23)) and got[:23] != got[23:46]
    again = sum(ids_of(take(InstanceStream(data, 4, seed=1, shuffle_window=6).batches(), 12)), [])
    other = sum(ids_of(take(InstanceStream(data, 4, seed=2, shuffle_window=6).batches(), 12)), [])
    assert got == again and got != other
    ordered = InstanceStream(data, 4, shuffle_window=0, epochs=1)
    assert sum(ids_of(ordered.batches()), []) == list(range(23))  # last batch short (3)


def test_ranks_split_the_global_stream_and_keep_the_global_batch(tmp_path):
    data = numbered_files(tmp_path, [9, 9, 9])
    single = ids_of(take(InstanceStream(data, 6, seed=3, shuffle_window=8).batches(), 8))
    ranks = [ids_of(take(InstanceStream(data, 3, seed=3, shuffle_window=8, rank=r, world_size=2).batches(), 8))
             for r in range(2)]  # fmt: skip
    for step in range(8):  # a global batch of 6 = rank 0's 3 + rank 1's 3: the same records
        assert sorted(ranks[0][step] + ranks[1][step]) == sorted(single[step])  # (multisets: 27 records
        # per epoch, so the global batch of step 4 spans two epochs)
    accumulated = ids_of(take(InstanceStream(data, 3, seed=3, shuffle_window=8).batches(), 16))
    for step in range(8):  # gradient accumulation: two micro-batches of 3 = the same global batch
        assert sorted(accumulated[2 * step] + accumulated[2 * step + 1]) == sorted(single[step])


def test_loader_workers_give_the_same_batches_in_the_same_order(tmp_path):
    data = numbered_files(tmp_path, [10, 10, 10])
    ref = take(InstanceStream(data, 4, seed=5, shuffle_window=7).batches(), 10)
    got = take(iter(make_loader(InstanceStream(data, 4, seed=5, shuffle_window=7), num_workers=2)), 10)
    assert ids_of(got) == ids_of(ref)
    assert [p for _, p in got] == [p for _, p in ref]
    for (a, _), (b, _) in zip(got, ref):
        for k in a:
            assert torch.equal(a[k], b[k])


@pytest.mark.parametrize("world", [1, 2])
def test_resume_from_any_position_continues_exactly(tmp_path, world):
    data = numbered_files(tmp_path, [13, 4, 9])  # 26 records: batches cross windows, files, epochs

    def stream(rank, start=None):
        return InstanceStream(data, 3, seed=7, shuffle_window=5, rank=rank, world_size=world, start=start)

    for rank in range(world):
        ref = take(stream(rank).batches(), 20)
        for k in (0, 3, 4, 9, 13):
            position = ref[k][1]
            resumed = take(stream(rank, Position.from_dict(position.to_dict())).batches(), 20 - k - 1)
            assert ids_of(resumed) == ids_of(ref[k + 1 :])
            assert [p for _, p in resumed] == [p for _, p in ref[k + 1 :]]
        # Resuming also works through loader workers (each worker skips to its own batches).
        workers = take(iter(make_loader(stream(rank, ref[5][1]), num_workers=2)), 6)
        assert ids_of(workers) == ids_of(ref[6:12])


class _StuckAfterTwo(InstanceStream):
    """A stream whose loader worker hands out two batches, then waits forever (as a worker once did)."""

    def _in_worker(self, worker, num_workers):
        import time

        for k, batch in enumerate(super()._in_worker(worker, num_workers)):
            if k == 2:
                time.sleep(3600)
            yield batch


def test_a_loader_worker_that_stops_producing_fails_in_one_line(tmp_path, monkeypatch):
    from core.errors import StorageFailed
    from model.data import stream as stream_module

    monkeypatch.setattr(stream_module, "LOADER_TIMEOUT_S", 3.0)
    data = numbered_files(tmp_path, [10, 10])
    batches = iter(make_loader(_StuckAfterTwo(data, 2, seed=5), num_workers=1))
    assert len(take(batches, 2)) == 2
    with pytest.raises(StorageFailed) as failed:
        next(batches)
    assert str(failed.value) == (
        f"reading {tmp_path}: no batch came from the loader's worker process in 3 s; rerun the same "
        "command: it resumes from its last checkpoint"
    )


EXIT_WITH_A_LIVE_LOADER = """
import sys
from model.data import InstanceFiles, InstanceStream, make_loader

paths, length, predictions = sys.argv[1].split(","), int(sys.argv[2]), int(sys.argv[3])
stream = InstanceStream(InstanceFiles(tuple(paths), length, predictions), 3, seed=7)
LOADER = iter(make_loader(stream, num_workers=2))  # still alive when the interpreter exits
next(LOADER)
print("one batch", flush=True)
"""


def test_the_process_exits_with_a_loader_still_alive(tmp_path):
    # Workers ignore SIGTERM, and multiprocessing's exit hook SIGTERMs its daemonic children then joins
    # them: without the loader's own exit hook, this process never ended (a pretrain run on gs:// hung).
    import subprocess
    import sys

    data = numbered_files(tmp_path, [13, 4, 9])
    args = [",".join(data.files), str(data.max_seq_length), str(data.max_predictions)]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        done = subprocess.run(
            [sys.executable, "-c", EXIT_WITH_A_LIVE_LOADER, *args],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=60,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the process did not exit: its loader workers were never told to end")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "one batch\n"


def test_worker_batches_arrive_with_a_tmpdir_longer_than_a_socket_path(tmp_path):
    """A worker's tensors travelled as shared-memory file descriptors, through a Unix socket that
    multiprocessing binds under TMPDIR; past 108 bytes the bind failed, the queue dropped the batch
    and the training process waited forever (the demo-on-GCS hang). Batches now travel as arrays."""
    import subprocess
    import sys

    data = numbered_files(tmp_path, [13, 4, 9])
    args = [",".join(data.files), str(data.max_seq_length), str(data.max_predictions)]
    long_tmp = tmp_path / ("t" * 60) / ("u" * 60)
    long_tmp.mkdir(parents=True)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    code = EXIT_WITH_A_LIVE_LOADER.replace(
        "import sys\n", "import sys\nfrom model.data import stream\nstream.LOADER_TIMEOUT_S = 30.0\n", 1
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=root,
        env={**os.environ, "TMPDIR": str(long_tmp)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and done.stdout == "one batch\n", done.stderr[-3000:]
    assert "AF_UNIX path too long" not in done.stderr


def test_batches_are_model_ready(instances_dir):
    from model.albert import AlbertForPreTraining
    from model.config import AlbertConfig

    data = find_instances(instances_dir, "train")
    batch, pos = next(InstanceStream(data, 4, seed=0).batches())
    assert set(batch) == {
        "input_ids", "attention_mask", "token_type_ids", "masked_lm_positions", "masked_lm_ids",
        "masked_lm_weights", "sentence_order_label",
    }  # fmt: skip
    assert batch["input_ids"].dtype == torch.int64 and batch["masked_lm_weights"].dtype == torch.float32
    assert batch["sentence_order_label"].shape == (4,) and batch["input_ids"].shape == (4, 64)
    # the labels are the tokens of the original text at the masked positions: real predictions only
    assert (batch["masked_lm_ids"][batch["masked_lm_weights"] > 0] > 0).all()
    assert dataclasses.asdict(pos)["next_batch"] == 1
    model = AlbertForPreTraining(AlbertConfig(**{**TINY_MODEL, "vocab_size": 3000, "num_hidden_layers": 1}))
    out = model(**batch)
    assert torch.isfinite(out.loss)

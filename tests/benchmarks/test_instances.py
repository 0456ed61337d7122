"""The benchmark's reference generator (records parse with the original schema, invariants hold) and the
benchmark itself on a tiny slice (the figures it reports exist and are sane; no timing is asserted)."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.instances import format_table, run_instances_bench
from benchmarks.reference_generator import (
    ReferenceConfig,
    generate,
    is_start_piece,
    tokenize_sentence,
    truncate_seq_pair,
)
from core.schema import tf_parse_spec

tf = pytest.importorskip("tensorflow")
L, P = 64, 10


def parse(path: str) -> list[dict]:
    spec = tf_parse_spec(L, P)
    return [
        {k: v.numpy() for k, v in tf.io.parse_single_example(raw, spec).items()}
        for raw in tf.data.TFRecordDataset(path)
    ]


@pytest.mark.parametrize("whole_word", ["sp", "zh"])
def test_reference_records_parse_and_keep_the_invariants(tmp_path, sample_docs, tokenizer, whole_word):
    docs = [d["sentences"] for d in sample_docs[:6]] + [["只有一句话的文章。"], ["", "  "]]
    np.random.seed(0)  # the n-gram draws use numpy's global RNG, as in the original
    config = ReferenceConfig(max_seq_length=L, max_predictions=P, whole_word=whole_word, dupe_factor=2)
    stats = generate(docs, tokenizer, str(tmp_path / "ref.tfrecord"), config)
    records = parse(str(tmp_path / "ref.tfrecord"))
    assert stats["documents"] == 7  # the empty document is dropped
    assert len(records) == stats["instances"] > 0
    assert sum(int(r["input_mask"].sum()) for r in records) == stats["real_tokens"]
    cls_id, sep_id, mask_id = tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id
    as_mask = predicted = 0
    for r in records:
        ids, mask, seg, boundary = r["input_ids"], r["input_mask"], r["segment_ids"], r["token_boundary"]
        n = int(mask.sum())
        assert mask.tolist() == [1] * n + [0] * (L - n) and not ids[n:].any()
        k = int(r["masked_lm_weights"].sum())
        assert r["masked_lm_weights"].tolist() == [1.0] * k + [0.0] * (P - k)
        assert 1 <= k <= min(P, max(1, round(n * 0.15)))
        pos, labels = r["masked_lm_positions"][:k], r["masked_lm_ids"][:k]
        assert (np.diff(pos) > 0).all() and (pos < n).all()
        assert not r["masked_lm_positions"][k:].any() and not r["masked_lm_ids"][k:].any()
        # The sequence before masking (a random replacement may draw any piece, as in the original).
        original = ids.copy()
        original[pos] = labels
        assert original[0] == cls_id and original[n - 1] == sep_id
        seps = np.flatnonzero(original[:n] == sep_id)
        assert len(seps) == 2 and 1 < seps[0] < n - 2  # both segments non-empty
        assert seg.tolist() == [0] * (seps[0] + 1) + [1] * (n - seps[0] - 1) + [0] * (L - n)
        assert boundary[[0, *seps]].all() and not boundary[n:].any()
        assert not np.isin(labels, [0, cls_id, sep_id, mask_id]).any()  # never [CLS]/[SEP]/padding
        as_mask += int((ids[pos] == mask_id).sum())
        predicted += k
        assert r["next_sentence_labels"][0] in (0, 1)
    assert 0.6 < as_mask / predicted < 0.95  # 80% [MASK], 10% random, 10% kept


def test_reference_word_starts_and_truncation(tokenizer):
    assert is_start_piece("▁the") and is_start_piece("中") and is_start_piece(",")
    assert not is_start_piece("ing")
    sp = tokenize_sentence(tokenizer, "我们在北京大学学习自然语言处理。", "sp")
    zh = tokenize_sentence(tokenizer, "我们在北京大学学习自然语言处理。", "zh")
    assert [p for p, _ in sp] == [p for p, _ in zh]
    assert all(s for _, s in sp) and sum(s for _, s in zh) < len(zh)  # words group characters
    import random

    a, b = list(range(10)), list(range(3))
    truncate_seq_pair(a, b, 8, random.Random(0))
    assert len(a) + len(b) == 8 and len(b) == 3  # only the longer one is trimmed


# Slow: eight commands and a reference run; `albert bench instances` is the same code.
@pytest.mark.slow
def test_bench_on_a_tiny_slice(tmp_path):
    r = run_instances_bench(
        max_seq_length=128,
        dupe_factors=(1, 2),
        modes=("zh",),
        documents=50,
        reference_docs=50,
        out_dir=str(tmp_path),
        log=lambda msg: None,
    )
    assert r["sample_documents"] == 50 and r["reference_documents"] == 50
    assert r["config"]["dupe_factors"] == [1, 2]
    by_dupe = r["modes"]["zh"]["dupe"]
    assert set(by_dupe) == {"1", "2"}, "every dupe factor measured in the same run"
    for row in by_dupe.values():
        for who in ("ours", "core", "reference"):
            f = row[who]
            assert f["real_tokens"] > 0 and f["instances"] > 0 and f["cpu_s"] > 0
            assert f["tokens_per_cpu_s"] > 0 and f["peak_rss_mb"] > 0
            assert 0 < f["fill_rate"] <= 1 and 0.1 < f["masked_fraction"] < 0.2
            # the whole command holds the work, plus the interpreter and the imports
            assert (
                f["command_cpu_s"] > f["cpu_s"] and 0 < f["command_tokens_per_cpu_s"] < f["tokens_per_cpu_s"]
            )
        assert row["ours"]["real_tokens"] == row["core"]["real_tokens"]  # same work, with and without Beam
        assert row["ours"]["documents"] == 50 and row["reference"]["documents"] == 50
        assert set(row["ratios"]) == {
            "command_throughput", "beam_throughput", "core_throughput", "fill_rate", "peak_rss"
        }  # fmt: skip
    one, two = by_dupe["1"], by_dupe["2"]
    # a copy per dupe, each packed with its own random short targets: about twice the tokens
    assert 1.9 < two["ours"]["real_tokens"] / one["ours"]["real_tokens"] < 2.1
    per_dupe = r["modes"]["zh"]["per_dupe"]
    assert set(per_dupe) == {"ours", "core", "reference"}
    for who, p in per_dupe.items():
        key = "cpu_s" if who == "core" else "command_cpu_s"
        assert p["cpu_s"] + p["fixed_cpu_s"] == pytest.approx(one[who][key], abs=2e-3)
    m = r["memory_scaling"]
    assert m["dupe_factor"] == 1
    assert set(m["ours_mb"]) == set(m["reference_mb"]) == {"1x", "3x"}
    assert all(v > 0 for v in [*m["ours_mb"].values(), *m["reference_mb"].values()])
    table = format_table(r)
    assert "reference" in table and "tokens / CPU-s" in table and "memory scaling" in table
    assert "dupe 1" in table and "dupe 2" in table and "whole command" in table


def test_bench_dupe_factors_option():
    from benchmarks.instances import _dupe_factors
    from core.errors import UserError

    assert _dupe_factors("1,10") == (1, 10)
    for bad in ("", "0,10", "1,1", "a"):
        with pytest.raises(UserError):
            _dupe_factors(bad)

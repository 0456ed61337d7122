"""The model benchmark runs end to end on a tiny config (the real figures come from `albert bench model`)."""

from __future__ import annotations

import pytest
import torch

from benchmarks.model import format_table, make_batch, peak_tflops, run_model_bench
from core.errors import UserError
from tests.model.tiny import tiny_config

SMALL = dict(batch_size=2, seq_len=16, predictions=3, steps=2, warmup=1, inference_steps=1)


def test_bench_side_by_side_with_transformers():
    pytest.importorskip("transformers")
    result = run_model_bench(config=tiny_config(), **SMALL)
    for name in ("ours", "transformers"):
        fig = result[name]
        assert len(result["train_times"][name]) == 2 and len(result["infer_times"][name]) == 1
        assert fig["steps_per_s"] == pytest.approx(1 / fig["step_s"])
        assert fig["train_tokens_per_s"] == pytest.approx(2 * 16 / fig["step_s"])
        assert fig["infer_tokens_per_s"] > 0 and fig["mfu"] is None  # no peak known for a CPU
    assert result["train_speedup"] == pytest.approx(
        result["ours"]["steps_per_s"] / result["transformers"]["steps_per_s"]
    )
    table = format_table(result)
    assert "train steps/s" in table and "inference tokens/s" in table and "x" in table.splitlines()[2]


def test_bench_without_reference_bf16_and_explicit_peak():
    result = run_model_bench(config=tiny_config(), dtype="bf16", reference=False, peak=1.0, **SMALL)
    assert result["transformers"] is None and result["train_speedup"] is None
    assert result["ours"]["mfu"] == pytest.approx(result["ours"]["tflops"] / 1.0)
    assert "MFU" in format_table(result)


def test_bench_rejects_bad_options():
    if not torch.cuda.is_available():
        with pytest.raises(UserError, match="no CUDA device"):
            run_model_bench(config=tiny_config(), device="cuda", **SMALL)
    with pytest.raises(UserError, match="dtype"):
        run_model_bench(config=tiny_config(), dtype="fp16", **SMALL)
    with pytest.raises(UserError, match="max_position_embeddings"):
        run_model_bench(config=tiny_config(), **{**SMALL, "seq_len": 64})
    assert peak_tflops(torch.device("cpu"), "bf16") is None


def test_bench_batch_follows_the_schema():
    b = make_batch(tiny_config(), batch_size=3, seq_len=16, predictions=4, pad_fraction=0.25, seed=0)
    assert b["attention_mask"][:, 12:].sum() == 0 and b["attention_mask"][:, :12].all()
    assert (b["masked_lm_positions"] > 0).all() and (b["masked_lm_positions"] < 11).all()
    assert torch.equal(b["masked_lm_ids"], torch.gather(b["input_ids"], 1, b["masked_lm_positions"]))
    for row in b["masked_lm_positions"]:
        assert row.unique().numel() == 4 and torch.equal(row, row.sort().values)

"""Our pretraining step learns like transformers' AlbertForPreTraining: from the same weights, on the
same batches, with the same AdamW, the losses and weights of a few steps agree to float rounding, and
the comparison does see a one-step difference (benchmarks/parity.py; the 200-step figure of the tiny
preset is `albert bench parity`, docs/albert.md §4)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest
import torch

pytest.importorskip("transformers")

from benchmarks.parity import (  # noqa: E402 (after the skip)
    Losses,
    StepInput,
    build_pair,
    decay_split,
    format_table,
    loss_differences,
    parameter_difference,
    parity_config,
    plan,
    reference_labels,
    run_parity,
    synthetic_batches,
    train_side_by_side,
)
from core.errors import UserError  # noqa: E402
from tests.model.tiny import tiny_config  # noqa: E402

STEPS, B, L, P = 6, 4, 16, 4
LR = 1e-2  # large for a few steps: the weights move far (up to ~5e-2), so agreement means something
# Measured: losses agree to 2e-7 relative (1-2 float32 ulps), weights to 4e-7 absolute, over seeds
# 0-3 at lr 1e-3 and 1e-2. The tolerances leave a margin of ~25-50x above that rounding noise.
LOSS_RTOL = 1e-5
PARAM_ATOL = 1e-5


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    """One intra-op thread, as the benchmark runs (tiny ops are much faster so on a shared CPU)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _plan(seed: int = 0) -> list[StepInput]:
    config = parity_config(tiny_config())
    return plan(synthetic_batches(config, STEPS, B, L, P, seed), LR, warmup=2, decay=False)


def _train(theirs_plan: list[StepInput] | None = None) -> tuple[list[Losses], list[Losses], float]:
    """Both models trained on _plan() (transformers' on `theirs_plan` when given): the per-step losses
    and the largest parameter difference at the end."""
    ours, theirs = build_pair(parity_config(tiny_config()), seed=0)
    steps = _plan()
    mine, other = train_side_by_side(ours, theirs, steps, theirs_plan or steps)
    return mine, other, parameter_difference(ours, theirs)[0]


def _worst_relative(mine: list[Losses], other: list[Losses]) -> float:
    return max(d / abs(b.total) for d, b in zip(loss_differences(mine, other), other))


def test_same_start_same_batches_same_losses_and_weights():
    mine, other, param_diff = _train()
    assert _worst_relative(mine, other) < LOSS_RTOL
    for a, b in zip(mine, other):  # the parts too: MLM over the real predictions only, SOP
        assert a.mlm == pytest.approx(b.mlm, rel=LOSS_RTOL) and a.sop == pytest.approx(b.sop, rel=LOSS_RTOL)
    assert param_diff < PARAM_ATOL
    assert mine[-1].total < mine[0].total  # it did learn (the same thing on both sides)


def test_a_different_learning_rate_at_one_step_is_seen():
    steps = _plan()
    theirs = [*steps[:3], dataclasses.replace(steps[3], lr=steps[3].lr * 1.5), *steps[4:]]
    mine, other, param_diff = _train(theirs)
    assert _worst_relative(mine[:4], other[:4]) < LOSS_RTOL  # the same until the step after it
    assert _worst_relative(mine, other) > 10 * LOSS_RTOL
    assert param_diff > 100 * PARAM_ATOL


def test_a_different_batch_at_one_step_is_seen():
    steps = _plan()
    theirs = [*steps[:2], _plan(seed=99)[2], *steps[3:]]
    mine, other, param_diff = _train(theirs)
    assert loss_differences(mine, other)[2] / other[2].total > 100 * LOSS_RTOL
    assert param_diff > 100 * PARAM_ATOL


def test_control_is_a_noise_floor():
    """Our model from a start one ulp away, on the same batches, lands as close as transformers' does."""
    result = run_parity(
        tiny_config(), steps=STEPS, batch_size=B, seq_len=L, predictions=P, lr=LR, warmup=2, control=True
    )
    noise = result["control"]
    assert 0 < noise["param_max_diff"] < PARAM_ATOL and noise["max_rel_loss_diff"] < LOSS_RTOL
    assert result["param_max_diff"] < PARAM_ATOL and set(noise["param_diffs"]) == set(result["param_diffs"])
    assert "noise floor" in format_table(result)


def test_weight_decay_groups_are_the_same_names():
    """The tied decoder weight counts once as the word embedding (decayed) and the decoder bias once as
    predictions.bias (not decayed), in both models."""
    ours, theirs = build_pair(parity_config(tiny_config()))
    decayed, rest = decay_split(ours)
    assert (decayed, rest) == decay_split(theirs)
    assert "albert.embeddings.word_embeddings.weight" in decayed and "predictions.bias" in rest
    assert not [n for n in decayed + rest if n.startswith("predictions.decoder.")]


def test_labels_follow_the_weights():
    batch = synthetic_batches(parity_config(tiny_config()), 1, B, L, P, seed=0)[0]
    labels = reference_labels(batch)  # (B, L)
    w = batch["masked_lm_weights"]
    assert 0 < w.sum() < w.numel()  # some predictions are padding
    assert (labels != -100).sum() == w.sum() and (labels[:, 0] == -100).all()
    real = w > 0
    rows = torch.arange(B)[:, None].expand(-1, P)[real]
    assert torch.equal(labels[rows, batch["masked_lm_positions"][real]], batch["masked_lm_ids"][real])
    with pytest.raises(UserError, match="0/1"):
        reference_labels({**batch, "masked_lm_weights": w * 0.5})


def test_run_reports_side_by_side():
    result = run_parity(tiny_config(), steps=3, batch_size=2, seq_len=L, predictions=P, warmup=1)
    assert len(result["ours"]) == len(result["transformers"]) == len(result["loss_diff"]) == 3
    assert result["max_loss_diff"] == max(result["loss_diff"]) and result["decay_groups"]["identical"]
    assert result["lrs"] == [0.0, 1e-3, 1e-3]
    assert result["control"] is None
    table = format_table(result)
    assert "loss, step 3" in table and "largest parameter difference" in table and "noise" not in table
    with pytest.raises(UserError, match="sharing"):
        run_parity(tiny_config(sharing="ffn", num_hidden_groups=2), steps=1)

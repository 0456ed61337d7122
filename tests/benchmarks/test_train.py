"""`albert bench train` on the tiny preset and a small real instance set (no figure is asserted but > 0)."""

from __future__ import annotations


def test_bench_train_reports_loader_and_step_rates(instances_dir):
    from benchmarks.train import format_table, run_train_bench

    r = run_train_bench(
        instances_dir, configs=("tiny",), batch_size=2, steps=1, reference=False, loader_seconds=0.2
    )
    assert r["loader"]["ours"]["per_cpu_second"] > 0 and r["loader"]["ours"]["instances"] > 0
    (t,) = r["train"]
    assert t["config"] == "tiny" and t["steps_per_s"] > 0 and t["tokens_per_s"] > 0 and t["seq_len"] == 64
    assert "instances/s per core" in format_table(r)

"""`albert bench train`: can the loader feed the model? Loader-only instances/s per core next to the
training step rate (steps/s, tokens/s) of the real trainer step, for tiny and base.

    python -m benchmarks.train [--instances DIR] [--configs tiny,base] [--seq-len 128] ...

Loader: `model.data.InstanceStream` in this process (framing, CRC check, window shuffle, parse, torch
tensors), measured in CPU seconds of the process, so the figure is per core whatever the machine's
load; beside it TensorFlow's tf.data + tf.io.parse_example on the same files (all its threads' CPU
time counted), the reference the loader replaces. Training: `Trainer.train_step` (the step the
trainer runs: global-count loss normalisation, backward, clipping, LAMB) on batches loaded
beforehand, wall time after warm-up steps. "loader cores needed" = training instances/s divided by
the loader's instances/s per core: below 1, one loader worker keeps a training process fed.

Without --instances, synthetic records (random ids over the tiny preset's 21,128-entry vocabulary,
97% fill like the sample's instances) are written to a temporary folder.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time

import numpy as np
import torch

from benchmarks.report import add_json_argument, module_main, report


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def write_synthetic(
    out: str, num: int, L: int, P: int, vocab: int = 21128, files: int = 4, seed: int = 0
) -> str:
    """`num` random instances in the schema (train split in `files` files, a small eval split) + manifest."""
    from core.manifest import write_manifest
    from core.tfrecord import frame_record
    from pipelines.tfexample import encode_examples

    rng = np.random.default_rng(seed)
    os.makedirs(out, exist_ok=True)

    def block(n):
        length = np.where(rng.random(n) < 0.9, L, rng.integers(P + 4, L, n))  # ~97% fill
        real = np.arange(L)[None, :] < length[:, None]
        ids = np.where(real, rng.integers(5, vocab, (n, L)), 0)
        seg = (np.arange(L)[None, :] >= (length // 2)[:, None]) & real
        pos = np.sort(np.stack([rng.choice(np.arange(1, k - 1), P, replace=False) for k in length]), axis=1)
        return encode_examples(
            {
                "input_ids": ids,
                "input_mask": real.astype(np.int64),
                "segment_ids": seg.astype(np.int64),
                "token_boundary": real.astype(np.int64),
                "masked_lm_positions": pos,
                "masked_lm_ids": np.take_along_axis(ids, pos, 1),
                "masked_lm_weights": np.ones((n, P), np.float32),
                "next_sentence_labels": rng.integers(0, 2, (n, 1)),
            }
        )

    for k in range(files):
        with open(os.path.join(out, f"train-{k:05d}.tfrecord"), "wb") as f:
            f.write(b"".join(frame_record(r) for r in block(num // files)))
    with open(os.path.join(out, "eval-00000.tfrecord"), "wb") as f:
        f.write(b"".join(frame_record(r) for r in block(64)))
    write_manifest(
        out,
        "instances",
        config={"packing": {"max_seq_length": L}, "masking": {"max_predictions": P}},
        summary={"train": {"instances": num // files * files}},
    )
    return out


def bench_loader(instances: str, batch_size: int, min_seconds: float = 3.0) -> dict:
    """Our stream (one process, no workers): instances per CPU second and per wall second."""
    from model.data import InstanceStream, find_instances

    data = find_instances(instances, "train")
    stream = InstanceStream(data, batch_size, seed=1, shuffle_window=10_000)
    n, cpu0, wall0 = 0, _cpu(), time.perf_counter()
    for batch, _ in stream.batches():
        n += len(batch["input_ids"])
        if time.perf_counter() - wall0 > min_seconds and _cpu() - cpu0 > min(0.5, min_seconds):
            break
    cpu, wall = _cpu() - cpu0, time.perf_counter() - wall0
    return {"instances": n, "per_cpu_second": n / cpu, "per_wall_second": n / wall}


def bench_tf_loader(instances: str, batch_size: int, min_seconds: float = 3.0) -> dict:
    """tf.data TFRecordDataset + shuffle + tf.io.parse_example (the original trainer's input path)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    from core.schema import tf_parse_spec
    from model.data import find_instances

    data = find_instances(instances, "train")
    spec = tf_parse_spec(data.max_seq_length, data.max_predictions)
    ds = (
        tf.data.TFRecordDataset(list(data.files))
        .repeat()
        .shuffle(10_000, seed=1)
        .batch(batch_size)
        .map(lambda x: tf.io.parse_example(x, spec))
    )
    n = 0
    it = iter(ds)
    next(it)  # graph building and the first shuffle buffer fill are start-up, not throughput
    cpu0, wall0 = _cpu(), time.perf_counter()
    for batch in it:
        arrays = {k: torch.from_numpy(v.numpy()) for k, v in batch.items()}
        n += len(arrays["input_ids"])
        if time.perf_counter() - wall0 > min_seconds and _cpu() - cpu0 > 0.5:
            break
    cpu, wall = _cpu() - cpu0, time.perf_counter() - wall0
    return {"instances": n, "per_cpu_second": n / cpu, "per_wall_second": n / wall}


def bench_steps(instances: str, preset: str, batch_size: int, steps: int, warmup: int, device: str) -> dict:
    """Trainer.train_step wall time on pre-loaded batches."""
    from model.train_config import TrainConfig
    from model.trainer import Trainer

    with tempfile.TemporaryDirectory() as run:
        cfg = TrainConfig.from_flat(
            instances=instances, out=run, model=preset, steps=10**6, batch_size=batch_size,
            warmup_steps=10, num_workers=0, device=device,
        )  # fmt: skip
        trainer = Trainer(cfg)
        batches = trainer._batches()
        loaded = [next(batches)[0] for _ in range(steps + warmup)]
        for b in loaded[:warmup]:
            trainer.train_step([b])
            trainer.step += 1
        if trainer.device.type == "cuda":
            torch.cuda.synchronize()
        start, cpu0 = time.perf_counter(), _cpu()
        tokens, step_times = 0.0, []
        for b in loaded[warmup:]:
            t0 = time.perf_counter()
            tokens += trainer.train_step([b])["tokens"]
            if trainer.device.type == "cuda":
                torch.cuda.synchronize()
            step_times.append(time.perf_counter() - t0)
            trainer.step += 1
        wall, cpu = time.perf_counter() - start, _cpu() - cpu0
        params = trainer.model.num_parameters()
        L = trainer.train_data.max_seq_length
        device_name = str(trainer.device)
        precision = trainer.precision
    return {
        "config": preset,
        "parameters": params,
        "batch_size": batch_size,
        "seq_len": L,
        "steps": steps,
        "steps_per_s": steps / wall,
        "instances_per_s": steps * batch_size / wall,
        "tokens_per_s": tokens / wall,
        "min_step_s": min(step_times),
        "cpu_s_per_step": cpu / steps,
        "device": device_name,
        "precision": precision,
    }


def run_train_bench(
    instances: str | None = None,
    configs: tuple[str, ...] = ("tiny", "base"),
    seq_len: int = 128,
    predictions: int = 20,
    batch_size: int = 16,
    steps: int = 5,
    warmup: int = 1,
    loader_batch: int = 64,
    synthetic_instances: int = 8192,
    device: str = "cpu",
    threads: int | None = None,
    reference: bool = True,
    loader_seconds: float = 3.0,
    log=lambda msg: None,
) -> dict:
    """Loader-only instances/s per core (ours, and tf.data as the reference), and train steps/s and
    tokens/s per config. Returns everything as a dict (format_table prints it)."""
    if threads:
        torch.set_num_threads(threads)
    with tempfile.TemporaryDirectory() as tmp:
        source = instances
        if source is None:
            log(f"writing {synthetic_instances} synthetic instances (L={seq_len}, P={predictions})")
            source = write_synthetic(
                os.path.join(tmp, "instances"), synthetic_instances, seq_len, predictions
            )
        load = os.getloadavg()[0]
        log("loader (ours)")
        ours = bench_loader(source, loader_batch, loader_seconds)
        tf_ref, tf_skipped = None, None
        if reference:
            log("loader (tf.data reference)")
            try:
                tf_ref = bench_tf_loader(source, loader_batch, loader_seconds)
            except ImportError as err:
                tf_skipped = f"tensorflow not importable: {err}"
        train = []
        for preset in configs:
            log(f"train step: {preset}")
            train.append(bench_steps(source, preset, batch_size, steps, warmup, device))
    for t in train:
        t["loader_cores_needed"] = t["instances_per_s"] / ours["per_cpu_second"]
    return {
        "instances": instances or "synthetic",
        "seq_len": seq_len,
        "loader": {
            "ours": ours,
            "tf_data": tf_ref,
            "tf_data_skipped": tf_skipped,
            "batch_size": loader_batch,
        },
        "train": train,
        "threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "load_before": load,
        "load_after": os.getloadavg()[0],
    }


def format_table(r: dict) -> str:
    lo = r["loader"]
    lines = [
        f"loader-only (L={r['seq_len']}, batch {lo['batch_size']}, one process):",
        f"  ours (no TensorFlow)   {lo['ours']['per_cpu_second']:>10,.0f} instances/s per core",
    ]
    if lo["tf_data"]:
        ratio = lo["ours"]["per_cpu_second"] / lo["tf_data"]["per_cpu_second"]
        lines.append(
            f"  tf.data + parse_example{lo['tf_data']['per_cpu_second']:>10,.0f} instances/s per core"
            f"   (ours / tf.data = {ratio:.2f})"
        )
    elif lo["tf_data_skipped"]:
        lines.append(f"  tf.data reference skipped: {lo['tf_data_skipped']}")
    lines.append("training step (Trainer.train_step, LAMB, fp32 unless bf16 autocast on cuda):")
    lines.append(
        f"  {'config':<8}{'params':>12}{'batch':>7}{'steps/s':>10}{'inst/s':>10}{'tokens/s':>11}"
        f"{'min step s':>12}{'CPU s/step':>12}{'loader cores':>14}"
    )
    for t in r["train"]:
        lines.append(
            f"  {t['config']:<8}{t['parameters']:>12,}{t['batch_size']:>7}{t['steps_per_s']:>10.3f}"
            f"{t['instances_per_s']:>10.1f}{t['tokens_per_s']:>11,.0f}{t['min_step_s']:>12.3f}"
            f"{t['cpu_s_per_step']:>12.3f}{t['loader_cores_needed']:>14.4f}"
        )
    dev = r["train"][0]["device"] if r["train"] else "?"
    lines.append(
        f"({dev}, {r['threads']} torch threads, {r['cpu_count']} CPUs; load {r['load_before']:.2f} -> "
        f"{r['load_after']:.2f}; loader cores = training instances/s / loader instances/s per core)"
    )
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--instances", default=None, help="instance folder (default: synthetic records)")
    parser.add_argument("--configs", default="tiny,base", help="comma-separated presets")
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--predictions", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=16, help="training batch")
    parser.add_argument("--steps", type=int, default=5, help="measured steps per config")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--loader-batch", type=int, default=64)
    parser.add_argument("--device", default="cpu", help="cpu, cuda or auto")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    parser.add_argument("--no-reference", action="store_true", help="skip the tf.data reference")
    add_json_argument(parser)


def run(args: argparse.Namespace) -> int:
    result = run_train_bench(
        instances=args.instances,
        configs=tuple(c for c in args.configs.split(",") if c),
        seq_len=args.seq_len,
        predictions=args.predictions,
        batch_size=args.batch_size,
        steps=args.steps,
        warmup=args.warmup,
        loader_batch=args.loader_batch,
        device=args.device,
        threads=args.threads,
        reference=not args.no_reference,
        log=lambda msg: print(msg, file=sys.stderr, flush=True),
    )
    return report(result, format_table(result), args.json)


if __name__ == "__main__":
    module_main("benchmarks.train", __doc__, add_arguments, run)

"""`albert bench model`: our pretraining step against transformers', side by side, same inputs.

Both models get the same config, the same weights (ours copied into transformers' by state dict) and
the same batch; steps alternate between the two so that a change in machine load hits both alike.

- train step: forward + backward + AdamW step. Ours gets the TFRecord features (masked_lm_positions
  etc.); transformers gets the equivalent `labels` [B, L] (-100 except at the masked positions) and,
  as its API does, computes MLM logits at every position.
- inference: the encoder alone (AlbertModel: sequence + pooled output), no grad, eval mode.
- MFU: model FLOPs per token (model.albert.model_flops_per_token, the same count for both) times
  tokens per second, over the peak of the device (PEAK_TFLOPS, or --peak-tflops). Unknown on CPU.

GPU: `--device cuda --dtype bf16 [--compile]` runs the same comparison under bf16 autocast (and
torch.compile for both models); the step is then timed with CUDA synchronisation.

    python -m benchmarks.model --config base --batch-size 8 --seq-len 128 --predictions 20
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

import torch

from benchmarks.report import add_json_argument, module_main, report
from core.errors import UserError
from model.albert import AlbertForPreTraining, model_flops_per_token
from model.config import AlbertConfig, load_config

# Dense (no sparsity) peak TFLOP/s per device: bf16/fp16 tensor cores, and plain fp32.
PEAK_TFLOPS: dict[str, dict[str, float]] = {
    "H200": {"bf16": 989.0, "fp32": 67.0},
    "H100": {"bf16": 989.0, "fp32": 67.0},  # SXM; the PCIe card is ~756 / 51
    "A100": {"bf16": 312.0, "fp32": 19.5},
    "L40S": {"bf16": 362.0, "fp32": 91.6},
    "A10G": {"bf16": 125.0, "fp32": 31.2},  # A10 / A10G
    "L4": {"bf16": 121.0, "fp32": 30.3},
    "V100": {"bf16": 125.0, "fp32": 15.7},  # V100 has no bf16: its fp16 tensor-core peak
    "T4": {"bf16": 65.0, "fp32": 8.1},  # fp16
}


def peak_tflops(device: torch.device, dtype: str) -> float | None:
    """Peak of the current CUDA device from PEAK_TFLOPS (None on CPU or for an unknown GPU)."""
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device).upper()
    for key, peaks in PEAK_TFLOPS.items():
        if key in name:
            return peaks["bf16" if dtype in ("bf16", "fp16") else "fp32"]
    return None


def make_batch(
    config: AlbertConfig, batch_size: int, seq_len: int, predictions: int, pad_fraction: float, seed: int
) -> dict[str, torch.Tensor]:
    """A random pretraining batch in the TFRecord schema; `pad_fraction` of each row's tail is padding."""
    g = torch.Generator().manual_seed(seed)
    B, L, P = batch_size, seq_len, predictions
    real = max(P + 2, round(L * (1 - pad_fraction)))
    if real > L:
        raise UserError(f"--predictions {P} needs sequences of at least {P + 2} real tokens")
    ids = torch.randint(5, config.vocab_size, (B, L), generator=g)
    mask = torch.zeros(B, L, dtype=torch.long)
    mask[:, :real] = 1
    ids[:, real:] = 0
    types = torch.zeros(B, L, dtype=torch.long)
    types[:, real // 2 : real] = 1
    positions = torch.stack(
        [torch.sort(torch.randperm(real - 2, generator=g)[:P] + 1).values for _ in range(B)]
    )
    return {
        "input_ids": ids,
        "attention_mask": mask,
        "token_type_ids": types,
        "masked_lm_positions": positions,
        "masked_lm_ids": torch.gather(ids, 1, positions),
        "masked_lm_weights": torch.ones(B, P),
        "sentence_order_label": torch.randint(0, 2, (B,), generator=g),
    }


def _reference_model(config: AlbertConfig, ours: AlbertForPreTraining):
    import transformers

    hf = {k: v for k, v in config.to_hf_dict().items() if k != "sharing"}
    model = transformers.AlbertForPreTraining(transformers.AlbertConfig(**hf))
    model.load_state_dict(ours.state_dict())
    return model


def _timed(fn: Callable[[], Any], device: torch.device) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process): on a shared CPU the second is steadier, since
    waiting for a core does not count (threads spinning at a barrier do)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start, cpu = time.perf_counter(), time.process_time()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start, time.process_time() - cpu


def run_model_bench(
    config: str | AlbertConfig = "base",
    batch_size: int = 8,
    seq_len: int = 128,
    predictions: int = 20,
    steps: int = 5,
    warmup: int = 1,
    inference_steps: int = 5,
    device: str = "cpu",
    dtype: str = "fp32",
    compile: bool = False,
    reference: bool = True,
    pad_fraction: float = 0.0,
    threads: int | None = None,
    peak: float | None = None,
    seed: int = 0,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Time our pretraining step and encoder inference against transformers'. Returns a JSON-able dict.

    Figures per model: step_s (median seconds per train step), steps_per_s, train_tokens_per_s,
    infer_tokens_per_s, tflops (model FLOPs achieved in training) and mfu (None without a known peak).
    """
    log = log or (lambda _msg: None)
    cfg = load_config(config) if isinstance(config, str) else config
    if dtype not in ("fp32", "bf16"):
        raise UserError(f"dtype must be fp32 or bf16, got {dtype!r}")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda: no CUDA device is available here")
    if threads:
        torch.set_num_threads(threads)
    if seq_len > cfg.max_position_embeddings:
        raise UserError(f"--seq-len {seq_len} > max_position_embeddings {cfg.max_position_embeddings}")

    torch.manual_seed(seed)
    ours = AlbertForPreTraining(cfg)
    models: dict[str, torch.nn.Module] = {"ours": ours}
    skipped = None
    if reference:
        try:
            models["transformers"] = _reference_model(cfg, ours)
        except ImportError:
            skipped = "transformers is not installed"
            log(f"reference skipped: {skipped}")
    batch = {
        k: v.to(dev) for k, v in make_batch(cfg, batch_size, seq_len, predictions, pad_fraction, seed).items()
    }
    labels = torch.full_like(batch["input_ids"], -100)
    labels.scatter_(1, batch["masked_lm_positions"], batch["masked_lm_ids"])

    autocast = (
        (lambda: torch.autocast(dev.type, dtype=torch.bfloat16))
        if dtype == "bf16"
        else (lambda: nullcontext())
    )
    runners: dict[str, tuple[Callable[[], Any], Callable[[], Any]]] = {}
    for name, model in models.items():
        model.to(dev).train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
        fwd = torch.compile(model) if compile else model
        backbone = torch.compile(model.albert) if compile else model.albert

        if name == "ours":

            def loss_fn(fwd=fwd):
                return fwd(**batch).loss

            def encode(backbone=backbone):
                return backbone(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
        else:

            def loss_fn(fwd=fwd):
                return fwd(
                    input_ids=batch["input_ids"],
                    attention_mask=batch["attention_mask"],
                    token_type_ids=batch["token_type_ids"],
                    labels=labels,
                    sentence_order_label=batch["sentence_order_label"],
                ).loss

            def encode(backbone=backbone):
                return backbone(
                    input_ids=batch["input_ids"],
                    attention_mask=batch["attention_mask"],
                    token_type_ids=batch["token_type_ids"],
                )

        def train_step(loss_fn=loss_fn, opt=opt):
            with autocast():
                loss = loss_fn()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        def infer_step(encode=encode, model=model):
            model.eval()
            with torch.inference_mode(), autocast():
                encode()
            model.train()

        runners[name] = (train_step, infer_step)

    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    train_times: dict[str, list[float]] = {n: [] for n in runners}
    train_cpu: dict[str, list[float]] = {n: [] for n in runners}
    infer_times: dict[str, list[float]] = {n: [] for n in runners}
    for i in range(warmup + steps):  # alternate the models step by step: load changes hit both
        for name, (train_step, _) in runners.items():
            t, cpu = _timed(train_step, dev)
            if i >= warmup:
                train_times[name].append(t)
                train_cpu[name].append(cpu)
            label = f"step {i - warmup + 1}" if i >= warmup else f"warmup {i + 1}"
            log(f"{label} {name}: {t:.3f} s ({cpu:.2f} CPU-s)")
    for i in range(1 + inference_steps):
        for name, (_, infer_step) in runners.items():
            t, _ = _timed(infer_step, dev)
            if i >= 1:
                infer_times[name].append(t)
    load_after = os.getloadavg()[0] if hasattr(os, "getloadavg") else None

    tokens = batch_size * seq_len
    flops_token = model_flops_per_token(cfg, seq_len, predictions)
    peak_value = peak if peak is not None else peak_tflops(dev, dtype)
    figures: dict[str, dict[str, float | None]] = {}
    for name in runners:
        step_s = statistics.median(train_times[name])
        infer_s = statistics.median(infer_times[name])
        tflops = tokens / step_s * flops_token / 1e12
        figures[name] = {
            "step_s": step_s,
            "step_s_min": min(train_times[name]),
            "step_cpu_s": statistics.median(train_cpu[name]),
            "steps_per_s": 1.0 / step_s,
            "train_tokens_per_s": tokens / step_s,
            "infer_s": infer_s,
            "infer_tokens_per_s": tokens / infer_s,
            "tflops": tflops,
            "mfu": tflops / peak_value if peak_value else None,
        }
    ref = figures.get("transformers")
    return {
        "config": cfg.to_hf_dict(),
        "batch_size": batch_size,
        "seq_len": seq_len,
        "predictions": predictions,
        "pad_fraction": pad_fraction,
        "steps": steps,
        "warmup": warmup,
        "device": str(dev),
        "device_name": torch.cuda.get_device_name(dev)
        if dev.type == "cuda"
        else platform.processor() or "cpu",
        "threads": torch.get_num_threads(),
        "dtype": dtype,
        "compile": compile,
        "torch": torch.__version__,
        "load_before": load_before,
        "load_after": load_after,
        "flops_per_token": flops_token,
        "peak_tflops": peak_value,
        "ours": figures["ours"],
        "transformers": ref,
        "reference_skipped": skipped,
        "train_speedup": ref and figures["ours"]["steps_per_s"] / ref["steps_per_s"],
        "infer_speedup": ref and figures["ours"]["infer_tokens_per_s"] / ref["infer_tokens_per_s"],
        "train_cpu_speedup": ref and ref["step_cpu_s"] / figures["ours"]["step_cpu_s"],
        "train_times": train_times,
        "infer_times": infer_times,
    }


def format_table(result: dict[str, Any]) -> str:
    """The side-by-side table the command prints."""
    rows = [("", "ours", "transformers", "ratio")]
    ours, ref = result["ours"], result["transformers"] or {}

    def cell(fig: dict, key: str, fmt: str) -> str:
        value = fig.get(key)
        return "-" if value is None else format(value, fmt)

    def ratio(key: str, inverse: bool = False) -> str:
        if not ref or not ref.get(key) or not ours.get(key):
            return "-"
        return f"{(ref[key] / ours[key]) if inverse else (ours[key] / ref[key]):.2f}x"

    # (label, key, format, higher is better)
    spec = [
        ("train step (s, median)", "step_s", ".3f", False),
        ("train step (s, min)", "step_s_min", ".3f", False),
        ("train step (CPU-s, median)", "step_cpu_s", ".2f", False),
        ("train steps/s", "steps_per_s", ".3f", True),
        ("train tokens/s", "train_tokens_per_s", ",.0f", True),
        ("inference tokens/s", "infer_tokens_per_s", ",.0f", True),
    ]
    for label, key, fmt, higher in spec:
        rows.append((label, cell(ours, key, fmt), cell(ref, key, fmt), ratio(key, inverse=not higher)))
    rows.append(("model TFLOP/s (train)", cell(ours, "tflops", ".3f"), cell(ref, "tflops", ".3f"), ""))
    if result["peak_tflops"]:
        rows.append(("MFU", cell(ours, "mfu", ".1%"), cell(ref, "mfu", ".1%"), ""))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = [
        "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
        for r in rows
    ]
    cfg = result["config"]
    head = (
        f"ALBERT pretraining step: H={cfg['hidden_size']} L={cfg['num_hidden_layers']} E={cfg['embedding_size']} "
        f"V={cfg['vocab_size']}, batch {result['batch_size']} x {result['seq_len']}, {result['predictions']} predictions, "
        f"{result['dtype']}{' compiled' if result['compile'] else ''} on {result['device']} "
        f"({result['threads']} threads), {result['steps']} steps after {result['warmup']} warmup; "
        f"load {result['load_before']:.2f} -> {result['load_after']:.2f}"
    )
    if result["reference_skipped"]:
        head += f"\n(reference skipped: {result['reference_skipped']})"
    return "\n".join([head, *lines])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default="base", help="preset (tiny, base, ...) or config JSON file")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--predictions", type=int, default=20, help="masked positions per sequence")
    parser.add_argument("--steps", type=int, default=5, help="measured train steps per model")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--inference-steps", type=int, default=5)
    parser.add_argument("--device", default="cpu", help="cpu or cuda (cuda:N)")
    parser.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32", help="bf16 = autocast")
    parser.add_argument("--compile", action="store_true", help="torch.compile both models")
    parser.add_argument("--no-reference", action="store_true", help="skip transformers")
    parser.add_argument("--pad-fraction", type=float, default=0.0, help="padding at the end of every row")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    parser.add_argument(
        "--peak-tflops", type=float, default=None, help="device peak for MFU (default: table)"
    )
    add_json_argument(parser)


def run(args: argparse.Namespace) -> int:
    result = run_model_bench(
        config=args.config,
        batch_size=args.batch_size,
        seq_len=args.seq_len,
        predictions=args.predictions,
        steps=args.steps,
        warmup=args.warmup,
        inference_steps=args.inference_steps,
        device=args.device,
        dtype=args.dtype,
        compile=args.compile,
        reference=not args.no_reference,
        pad_fraction=args.pad_fraction,
        threads=args.threads,
        peak=args.peak_tflops,
        log=lambda msg: print(msg, file=sys.stderr, flush=True),
    )
    return report(result, format_table(result), args.json)


if __name__ == "__main__":
    module_main("benchmarks.model", __doc__, add_arguments, run)

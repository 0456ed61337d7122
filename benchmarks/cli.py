"""`albert bench TARGET`: throughput benchmarks, each printed side by side with a reference measured in
the same run (a ratio), never asserted in tests.

    instances  our Beam instance pipeline vs the original single-process generator's algorithm
    tokenize   the encode path: compiled normalization (spm.model) vs the older Python rules
    corpus     read+clean+dedup+segment on the sample, and near-duplicate precision/recall
    model      our pretraining step vs transformers' AlbertForPreTraining (same config and inputs)
    train      loader-only instances/s next to training steps/s
    parity     not a speed: our training step vs transformers' from the same weights on the same
               batches, the per-step loss difference and the final weight difference
    all        every one of the above, in that order
    scale      corpus -> vocab -> instances at 1x, 4x, 16x the sample: the cost-growth curve and its
               targets (`make bench-scale`); not in `all`, as it runs for tens of minutes
    pretraining-value
               does pretraining pay: the tiny model pretrained at several CPU budgets, each checkpoint
               fine-tuned on both tasks next to the same-search scratch model and the baselines
               (docs/pretraining-value.md); not in `all`: hours on a 2-core CPU (--tiny: seconds)

Each target runs as its own process (`python -m MODULE`), so peak memory and imports do not leak from
one into the next. Options after the target go to it (`albert bench model --device cuda`); every
target takes `--json PATH` to also write its figures as JSON.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

TARGETS = {
    "instances": "benchmarks.instances",
    "tokenize": "benchmarks.tokenize",
    "corpus": "benchmarks.corpus",
    "model": "benchmarks.model",
    "train": "benchmarks.train",
    "parity": "benchmarks.parity",
    "scale": "benchmarks.scale",
    "pretraining-value": "benchmarks.pretraining_value",
}
LONG = ("scale", "pretraining-value")  # left out of `all`: tens of minutes to hours


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("target", choices=[*TARGETS, "all"], help="what to measure")
    p.add_argument("options", nargs=argparse.REMAINDER, help="options passed to the target's benchmark")


def run(args: argparse.Namespace) -> int:
    targets = [t for t in TARGETS if t not in LONG] if args.target == "all" else [args.target]
    failed = []
    for name in targets:
        print(f"\n=== albert bench {name} ===", flush=True)
        started = time.time()
        code = subprocess.call([sys.executable, "-m", TARGETS[name], *args.options])
        print(f"=== {name}: exit {code}, {time.time() - started:.0f} s ===", flush=True)
        if code:
            failed.append(name)
    if failed:
        print(f"benchmarks that failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0

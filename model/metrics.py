"""What a pretraining run reports: metrics.jsonl, TensorBoard events under tb/, a progress line, and
curves.png at the end, all in the run folder.

metrics.jsonl holds one JSON record per line:

    {"kind": "train", "step", <means over the window's finite steps: loss, mlm_loss, sop_loss, mlm_acc,
     sop_acc, grad_norm>, "lr", "tokens_per_s", "steps_per_s", "skipped_steps", "elapsed_s"}
    {"kind": "eval", "step", <model.evaluate.summarize: masked_lm_loss, masked_lm_accuracy, ...,
     sequences, predictions (what the means are over: the first eval_batches batches of the split)>}

A train record sums up a `MetricsWindow`: the steps since the previous one.
"""

from __future__ import annotations

import json
import os
import sys
import time
import types
from dataclasses import dataclass, field

from core import storage

# The step metrics a train record averages over the window's finite steps (in this order).
AVERAGED = ("loss", "mlm_loss", "sop_loss", "mlm_acc", "sop_acc", "grad_norm")


@dataclass
class MetricsWindow:
    """The steps since the last train record: averages over its finite steps, rates over its time."""

    started: float = field(default_factory=time.monotonic)  # rates from a clock that never jumps
    steps: int = 0
    good: int = 0
    """Steps with a finite loss and gradient (the averages are over these)."""
    tokens: float = 0.0
    sums: dict[str, float] = field(default_factory=lambda: dict.fromkeys(AVERAGED, 0.0))

    def add(self, m: dict) -> None:
        """One step's metrics (Trainer.train_step)."""
        if m["finite"]:
            for k in AVERAGED:
                self.sums[k] += m[k]
        self.steps += 1
        self.good += int(m["finite"])
        self.tokens += m["tokens"]

    def record(self, step: int, lr: float, skipped_steps: int, elapsed_s: float) -> dict:
        """The window's train record (no averages when none of its steps was finite)."""
        seconds = max(time.monotonic() - self.started, 1e-9)
        means = {k: v / self.good for k, v in self.sums.items()} if self.good else {}
        return {
            "kind": "train",
            "step": step,
            **means,
            "lr": lr,
            "tokens_per_s": self.tokens / seconds,
            "steps_per_s": self.steps / seconds,
            "skipped_steps": skipped_steps,
            "elapsed_s": elapsed_s,
        }


def progress_line(rec: dict, total_steps: int) -> str:
    """A train record as the progress line: step, loss, accuracies, lr, throughput and ETA."""
    eta = int(max(0, (total_steps - rec["step"]) / max(rec["steps_per_s"], 1e-9)))
    return (
        f"step {rec['step']}/{total_steps} loss {rec.get('loss', float('nan')):.4f} "
        f"mlm_acc {rec.get('mlm_acc', 0):.3f} sop_acc {rec.get('sop_acc', 0):.3f} lr {rec['lr']:.3g} "
        f"{rec['tokens_per_s']:,.0f} tok/s ETA {eta // 3600}:{eta // 60 % 60:02d}:{eta % 60:02d}"
    )


def read_metrics(path: str) -> list[dict]:
    """The records of a metrics.jsonl. A killed run can leave a torn last line: it is skipped."""
    rows = []
    for line in open(path, encoding="utf-8") if os.path.exists(path) else []:
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue
    return rows


class MetricsLog:
    """metrics.jsonl + TensorBoard + a progress line (tqdm on a terminal). Main rank only.

    The files are written in `files` (a storage.Mirror of the run folder: the folder itself when it is
    local, a temporary copy uploaded every `sync_seconds` and at the end when it is a URL)."""

    def __init__(
        self, files: storage.Mirror | None, total_steps: int, start_step: int, sync_seconds: float = 30.0
    ):
        self.enabled = files is not None
        self.files = files
        self.tb = None
        self.bar = None
        self.sync_seconds, self.last_sync = sync_seconds, time.monotonic()
        if files is None:
            return
        self.path = files.path("metrics.jsonl")
        try:
            if "tensorflow" not in sys.modules:
                # TensorBoard's writer would import TensorFlow (4 s, ~1 GB) for its file API; its
                # documented switch "tensorboard.compat.notf" selects the built-in stub instead.
                sys.modules.setdefault("tensorboard.compat.notf", types.ModuleType("tensorboard.compat.notf"))
            from torch.utils.tensorboard import SummaryWriter

            self.tb = SummaryWriter(files.path("tb"), purge_step=start_step or None)
        except ImportError:  # pragma: no cover - tensorboard is a dependency
            self.tb = None
        if sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total_steps, initial=start_step, unit="step", dynamic_ncols=True)

    def write(self, record: dict, progress: str | None = None, advance: int = 0) -> None:
        if not self.enabled:
            return
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        if self.tb is not None:
            prefix = record.get("kind", "train")
            for k, v in record.items():
                if isinstance(v, (int, float)) and k not in ("step", "kind"):
                    self.tb.add_scalar(f"{prefix}/{k}", v, record["step"])
        if time.monotonic() - self.last_sync >= self.sync_seconds:
            self.sync()
        if self.bar is not None:
            self.bar.update(advance)
            if progress:
                self.bar.set_postfix_str(progress)
        elif progress:
            print(progress, file=sys.stderr, flush=True)

    def message(self, text: str) -> None:
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.write(text)
        else:
            print(text, file=sys.stderr, flush=True)

    def sync(self) -> None:
        """Upload what changed (a remote run folder); flushes TensorBoard first."""
        if self.files is None:
            return
        if self.tb is not None:
            self.tb.flush()
        self.files.sync()
        self.last_sync = time.monotonic()

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()
        if self.bar is not None:
            self.bar.close()
        self.sync()


def plot_curves(run_dir: str) -> str | None:
    """curves.png from metrics.jsonl in a local folder (the run folder or its Mirror): loss (train,
    eval) and MLM/SOP accuracy against the step."""
    path = os.path.join(run_dir, "metrics.jsonl")
    rows = read_metrics(path)
    if not rows:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    train = [r for r in rows if r.get("kind") == "train" and "loss" in r]
    evals = [r for r in rows if r.get("kind") == "eval"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    if train:
        steps = [r["step"] for r in train]
        ax1.plot(steps, [r["loss"] for r in train], label="train loss")
        ax1.plot(steps, [r["mlm_loss"] for r in train], label="train MLM loss", alpha=0.6)
        ax2.plot(steps, [r["mlm_acc"] for r in train], label="train MLM acc")
        ax2.plot(steps, [r["sop_acc"] for r in train], label="train SOP acc", alpha=0.6)
    if evals:
        steps = [r["step"] for r in evals]
        ax1.plot(
            steps, [r["masked_lm_loss"] + r["sentence_order_loss"] for r in evals], "o-", label="eval loss"
        )
        ax2.plot(steps, [r["masked_lm_accuracy"] for r in evals], "o-", label="eval MLM acc")
        ax2.plot(steps, [r["sentence_order_accuracy"] for r in evals], "o-", label="eval SOP acc")
    ax1.set_xlabel("step")
    ax1.set_ylabel("loss")
    ax2.set_xlabel("step")
    ax2.set_ylabel("accuracy")
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    out = os.path.join(run_dir, "curves.png")
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out

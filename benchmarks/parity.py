"""`albert bench parity`: does our pretraining step LEARN like transformers' AlbertForPreTraining?

`albert bench model` shows the two compute the same forward pass; this trains both, side by side, and
follows the losses and the weights:

- one start: our AlbertForPreTraining initialised, its weights copied into transformers' model
  (benchmarks.model's reference builder; the keys are the same, model/convert.py);
- dropout off in both (every dropout probability of the config set to 0), fp32, CPU;
- the same optimizer built the same way: torch's AdamW over model.optim.param_groups (no weight
  decay on LayerNorm and bias parameters, each tied Parameter once: the decoder weight IS the word
  embedding in both, the decoder bias IS predictions.bias), the same learning rate at every step
  (linear warm-up, then constant, or the trainer's linear decay with --decay) and the same gradient
  clipping (global norm, as the trainer clips);
- the same batch at every step: seeded random ones (benchmarks.model.make_batch, plus padded
  predictions of weight 0 as real instances have on short rows) or real instances (--instances DIR).

The losses are defined alike: ours is sum(w * CE) / sum(w) over masked_lm_weights w plus the SOP
cross-entropy; transformers' is the mean CE over `labels` != -100 plus the same SOP term. With weights
0/1 and `labels` = masked_lm_ids at the positions of weight 1 (-100 elsewhere) the two are the same
number (fractional weights have no transformers counterpart and are refused).

Printed: the loss of both at a few steps with their difference, the largest per-step difference, and
at the end the largest difference of any parameter (next to how far training moved the weights).
Rounding differs between the two (other kernels, other summation orders), and Adam divides each
update by the gradient's own scale, so a weight whose gradient is nearly zero turns rounding into a
visible step: `--control` trains our model a second time from a start one float32 ulp away, and its
differences from the first run are the floor that rounding alone reaches.

One torch thread by default: the figures do not depend on speed, and tiny matrices run many times
faster on one thread than on two when the CPU is shared.

    python -m benchmarks.parity --config tiny --steps 200 --batch-size 8 --seq-len 64 [--control]
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from benchmarks.model import _reference_model, make_batch
from benchmarks.report import add_json_argument, module_main, report
from core.errors import UserError
from model.albert import AlbertForPreTraining
from model.config import AlbertConfig, load_config
from model.convert import to_hf_state_dict
from model.optim import Schedule, build_optimizer, excluded

Batch = dict[str, torch.Tensor]


@dataclass(frozen=True)
class Losses:
    total: float
    mlm: float
    sop: float


@dataclass(frozen=True)
class StepInput:
    """What one side gets at one step: the batch (TFRecord schema) and the learning rate."""

    batch: Batch
    lr: float


# ---------------------------------------------------------------------------------------------------
# The two models, their optimizers and their losses


def parity_config(config: AlbertConfig) -> AlbertConfig:
    """`config` with every dropout off: with dropout the two sides draw different masks."""
    if config.sharing not in ("all", "none"):
        # transformers holds partial sharing as untied copies (model/convert.py): each copy would get
        # its own gradient where ours sums one, so the two would not train alike by construction.
        raise UserError(
            f"parity needs sharing 'all' or 'none' (transformers' layouts), not {config.sharing!r}"
        )
    return config.replace(
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, classifier_dropout_prob=0.0
    )


def build_pair(config: AlbertConfig, seed: int = 0) -> tuple[AlbertForPreTraining, torch.nn.Module]:
    """(ours, transformers' AlbertForPreTraining) with identical weights, both in train mode."""
    torch.manual_seed(seed)
    ours = AlbertForPreTraining(config)
    theirs = _reference_model(config, ours)
    return ours.train(), theirs.train()


def make_optimizer(model: torch.nn.Module, weight_decay: float) -> torch.optim.Optimizer:
    """AdamW over model.optim.param_groups, as `albert pretrain --optimizer adamw` builds it (the
    learning rate is set at every step)."""
    return build_optimizer(model, "adamw", lr=0.0, weight_decay=weight_decay)


def decay_split(model: torch.nn.Module) -> tuple[list[str], list[str]]:
    """(decayed, not decayed) parameter names, sorted, each Parameter once under its first name: what
    make_optimizer puts in its two groups."""
    decayed, rest = [], []
    for name, p in model.named_parameters():
        if p.requires_grad:
            (rest if excluded(name) else decayed).append(name)
    return sorted(decayed), sorted(rest)


def reference_labels(batch: Batch) -> torch.Tensor:
    """transformers' `labels` (B, L): masked_lm_ids at the positions of weight 1, -100 elsewhere."""
    w = batch["masked_lm_weights"]
    if not bool(((w == 0) | (w == 1)).all()):
        raise UserError("masked_lm_weights other than 0/1 have no transformers counterpart")
    labels = torch.full_like(batch["input_ids"], -100)
    # Padded predictions (weight 0) sit at position 0 ([CLS], never predicted) and write -100 there.
    values = torch.where(w > 0, batch["masked_lm_ids"].long(), torch.full_like(labels[:, :1], -100))
    return labels.scatter_(1, batch["masked_lm_positions"].long(), values)


def ours_losses(model: torch.nn.Module, batch: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(total, MLM, SOP) of our model: the schema's features as they are."""
    out = model(**batch)
    return out.loss, out.mlm_loss, out.sop_loss


def reference_losses(model: torch.nn.Module, batch: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(total, MLM, SOP) of transformers' model: `labels` for the MLM, logits at every position."""
    labels = reference_labels(batch)
    out = model(
        input_ids=batch["input_ids"],
        attention_mask=batch["attention_mask"],
        token_type_ids=batch["token_type_ids"],
        labels=labels,
        sentence_order_label=batch["sentence_order_label"],
    )
    # Its output has the total only; the parts as its forward computes them (mean over labels != -100).
    logits = out.prediction_logits  # (B, L, V)
    mlm = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100)
    sop = F.cross_entropy(out.sop_logits, batch["sentence_order_label"].long().reshape(-1))
    return out.loss, mlm, sop


LossFn = Callable[[torch.nn.Module, Batch], tuple[torch.Tensor, torch.Tensor, torch.Tensor]]


def train_step(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer, losses: LossFn, step: StepInput, clip: float
) -> Losses:
    """Forward, backward, clip (global norm; 0 = none), one AdamW update at step.lr."""
    for group in optimizer.param_groups:
        group["lr"] = step.lr
    total, mlm, sop = losses(model, step.batch)
    total.backward()
    if clip > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return Losses(total.item(), mlm.item(), sop.item())


def loss_differences(mine: Sequence[Losses], other: Sequence[Losses]) -> list[float]:
    """|ours - theirs| of the total loss at every step."""
    return [abs(a.total - b.total) for a, b in zip(mine, other, strict=True)]


def weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The weights under transformers' keys: ours through to_hf_state_dict (each tied tensor once)."""
    if isinstance(model, AlbertForPreTraining):
        return to_hf_state_dict(model)[0]
    return {k: v.detach() for k, v in model.state_dict().items()}


def tensor_differences(ours: AlbertForPreTraining, other: torch.nn.Module) -> dict[str, float]:
    """{key: largest |ours - other| in that tensor} over our keys (other: transformers' or ours)."""
    theirs = weights(other)
    return {k: (v - theirs[k]).abs().max().item() for k, v in weights(ours).items()}


def parameter_difference(ours: AlbertForPreTraining, other: torch.nn.Module) -> tuple[float, str]:
    """(largest |ours - other| over every weight, its key)."""
    diffs = tensor_differences(ours, other)
    key = max(diffs, key=diffs.__getitem__)
    return diffs[key], key


def perturbed_twin(config: AlbertConfig, seed: int) -> AlbertForPreTraining:
    """Our model from build_pair's start with every weight moved one float32 ulp up: trained on the
    same batches, it shows how far rounding alone carries two runs apart (the noise floor)."""
    torch.manual_seed(seed)
    twin = AlbertForPreTraining(config)
    with torch.no_grad():
        for p in twin.parameters():
            p.copy_(torch.nextafter(p, torch.full_like(p, math.inf)))
    return twin.train()


# ---------------------------------------------------------------------------------------------------
# Batches and the run


def padded_predictions(batch: Batch, seed: int) -> Batch:
    """`batch` with the tail of some rows' predictions turned into padding (position 0, id 0, weight
    0), as the instance writer pads rows with fewer than P predictions."""
    g = torch.Generator().manual_seed(seed)
    B, P = batch["masked_lm_positions"].shape
    keep = torch.randint(max(1, P // 2), P + 1, (B,), generator=g)  # real predictions per row
    real = torch.arange(P)[None, :] < keep[:, None]  # (B, P)
    out = dict(batch)
    out["masked_lm_positions"] = batch["masked_lm_positions"] * real
    out["masked_lm_ids"] = batch["masked_lm_ids"] * real
    out["masked_lm_weights"] = real.float()
    return out


def synthetic_batches(
    config: AlbertConfig, steps: int, batch_size: int, seq_len: int, predictions: int, seed: int
) -> list[Batch]:
    """One seeded random batch per step: 10% padding at the end of every row, padded predictions."""
    return [
        padded_predictions(make_batch(config, batch_size, seq_len, predictions, 0.1, seed + s), seed + s)
        for s in range(steps)
    ]


def instance_batches(path: str, config: AlbertConfig, steps: int, batch_size: int, seed: int) -> list[Batch]:
    """The first `steps` batches of an instance folder's train split (our loader, shuffled by seed)."""
    from model.data import InstanceStream, find_instances

    data = find_instances(path, "train")
    if data.max_seq_length > config.max_position_embeddings:
        raise UserError(
            f"{path}: sequences of {data.max_seq_length} > max_position_embeddings {config.max_position_embeddings}"
        )
    out = []
    for batch, _ in InstanceStream(data, batch_size, seed=seed).batches():
        if int(batch["input_ids"].max()) >= config.vocab_size:
            raise UserError(f"{path}: token ids beyond the config's vocabulary of {config.vocab_size}")
        out.append(batch)
        if len(out) == steps:
            return out
    raise UserError(f"{path}: fewer than {steps} batches of {batch_size}")


def plan(batches: Sequence[Batch], lr: float, warmup: int, decay: bool) -> list[StepInput]:
    """Each batch with the rate the trainer would apply (model.optim.Schedule, s = updates done
    before this one, so the first update of a warm-up is at rate 0): linear warm-up, then constant
    (power 0), or with `decay` the trainer's linear decay to 0 at the last step."""
    schedule = Schedule(peak=lr, warmup=warmup, total=len(batches), power=1.0 if decay else 0.0)
    return [StepInput(b, schedule(s)) for s, b in enumerate(batches)]


def train_side_by_side(
    ours: AlbertForPreTraining,
    theirs: torch.nn.Module,
    ours_plan: Sequence[StepInput],
    theirs_plan: Sequence[StepInput],
    weight_decay: float = 0.01,
    clip: float = 1.0,
    log: Callable[[str], None] | None = None,
) -> tuple[list[Losses], list[Losses]]:
    """Train both models step by step, each on its plan (the same one, but for tests that show a
    difference is seen). Returns the per-step losses of (ours, theirs)."""
    if len(ours_plan) != len(theirs_plan):
        raise ValueError("the two plans must have the same number of steps")
    opt_ours, opt_theirs = make_optimizer(ours, weight_decay), make_optimizer(theirs, weight_decay)
    mine: list[Losses] = []
    other: list[Losses] = []
    for s, (a, b) in enumerate(zip(ours_plan, theirs_plan), start=1):
        mine.append(train_step(ours, opt_ours, ours_losses, a, clip))
        other.append(train_step(theirs, opt_theirs, reference_losses, b, clip))
        if log and (s == 1 or s % 20 == 0 or s == len(ours_plan)):
            log(f"step {s}: ours {mine[-1].total:.6f}, transformers {other[-1].total:.6f}")
    return mine, other


def train_alone(
    model: torch.nn.Module, steps: Sequence[StepInput], weight_decay: float = 0.01, clip: float = 1.0
) -> list[Losses]:
    """One of our models on its own: the per-step losses."""
    optimizer = make_optimizer(model, weight_decay)
    return [train_step(model, optimizer, ours_losses, step, clip) for step in steps]


def summary(
    ours: AlbertForPreTraining, other: torch.nn.Module, mine: Sequence[Losses], theirs: Sequence[Losses]
) -> dict[str, Any]:
    """The figures of one comparison: per-step loss differences, per-tensor weight differences."""
    diffs = loss_differences(mine, theirs)
    worst = max(range(len(diffs)), key=diffs.__getitem__)
    tensors = tensor_differences(ours, other)
    key = max(tensors, key=tensors.__getitem__)
    return {
        "loss_diff": diffs,
        "max_loss_diff": diffs[worst],
        "max_loss_diff_step": worst + 1,
        "max_rel_loss_diff": max(d / abs(b.total) for d, b in zip(diffs, theirs)),
        "param_max_diff": tensors[key],
        "param_max_diff_key": key,
        # The largest difference in any OTHER tensor: is the worst one alone?
        "param_max_diff_elsewhere": max((v for k, v in tensors.items() if k != key), default=0.0),
        "param_diffs": tensors,
    }


def run_parity(
    config: str | AlbertConfig = "tiny",
    steps: int = 200,
    batch_size: int = 8,
    seq_len: int = 64,
    predictions: int = 10,
    lr: float = 1e-3,
    warmup: int = 10,
    decay: bool = False,
    weight_decay: float = 0.01,
    clip: float = 1.0,
    instances: str | None = None,
    seed: int = 0,
    control: bool = False,
    threads: int | None = 1,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Train ours and transformers' model from the same start on the same batches; a JSON-able dict.
    With `control`, also our model from a start one ulp away (perturbed_twin) on the same batches:
    its differences from ours are the noise floor that rounding alone reaches."""
    import transformers

    if steps < 1:
        raise UserError(f"--steps must be at least 1, got {steps}")
    if threads:
        torch.set_num_threads(threads)
    cfg = parity_config(load_config(config) if isinstance(config, str) else config)
    if instances is None and seq_len > cfg.max_position_embeddings:
        raise UserError(f"--seq-len {seq_len} > max_position_embeddings {cfg.max_position_embeddings}")
    started = time.perf_counter()
    if instances is None:
        batches = synthetic_batches(cfg, steps, batch_size, seq_len, predictions, seed)
    else:
        batches = instance_batches(instances, cfg, steps, batch_size, seed)
    seq_len, predictions = batches[0]["input_ids"].shape[1], batches[0]["masked_lm_positions"].shape[1]
    steps_in = plan(batches, lr, warmup, decay)

    ours, theirs = build_pair(cfg, seed)
    groups_ours, groups_theirs = decay_split(ours), decay_split(theirs)
    start = {k: v.clone() for k, v in weights(ours).items()}
    mine, other = train_side_by_side(ours, theirs, steps_in, steps_in, weight_decay, clip, log)
    end = weights(ours)
    moved = max((end[k] - v).abs().max().item() for k, v in start.items())
    noise = None
    if control:
        if log:
            log("control: our model from a start one ulp away, on the same batches")
        twin = perturbed_twin(cfg, seed)
        noise = summary(ours, twin, mine, train_alone(twin, steps_in, weight_decay, clip))
    return {
        "config": cfg.to_hf_dict(),
        "source": instances or "synthetic",
        "batch_size": batch_size,
        "seq_len": seq_len,
        "predictions": predictions,
        "steps": steps,
        "lr": lr,
        "warmup": warmup,
        "decay": decay,
        "weight_decay": weight_decay,
        "clip": clip,
        "seed": seed,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "transformers_version": transformers.__version__,
        "seconds": time.perf_counter() - started,
        "decay_groups": {
            "ours": [len(g) for g in groups_ours],
            "transformers": [len(g) for g in groups_theirs],
            "identical": groups_ours == groups_theirs,
        },
        "lrs": [s.lr for s in steps_in],
        "ours": [dataclasses.asdict(x) for x in mine],
        "transformers": [dataclasses.asdict(x) for x in other],
        **summary(ours, theirs, mine, other),
        "param_max_change": moved,
        "control": noise,
    }


# ---------------------------------------------------------------------------------------------------
# Report


def shown_steps(steps: int, rows: int = 5) -> list[int]:
    """Step numbers (1-based) of the table's loss rows: the first, the last and a few in between."""
    return sorted({1, steps, *(round(steps * k / (rows - 1)) for k in range(1, rows - 1))} - {0})


def format_table(result: dict[str, Any]) -> str:
    """The side-by-side table the command prints."""
    ours, theirs = result["ours"], result["transformers"]
    rows = [("", "ours", "transformers", "|difference|")]
    for s in shown_steps(result["steps"]):
        a, b = ours[s - 1], theirs[s - 1]
        rows.append(
            (
                f"loss, step {s}",
                f"{a['total']:.6f}",
                f"{b['total']:.6f}",
                f"{abs(a['total'] - b['total']):.2e}",
            )
        )
    last = result["steps"]
    for part in ("mlm", "sop"):
        a, b = ours[-1][part], theirs[-1][part]
        rows.append((f"{part.upper()} loss, step {last}", f"{a:.6f}", f"{b:.6f}", f"{abs(a - b):.2e}"))
    groups = result["decay_groups"]
    rows.append(
        (
            "tensors decayed / not",
            "{} / {}".format(*groups["ours"]),
            "{} / {}".format(*groups["transformers"]),
            "same names" if groups["identical"] else "DIFFERENT",
        )
    )
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = [
        "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
        for r in rows
    ]
    cfg = result["config"]
    schedule = "then linear decay" if result["decay"] else "then constant"
    head = (
        f"Learning parity, ours vs transformers' AlbertForPreTraining: H={cfg['hidden_size']} "
        f"L={cfg['num_hidden_layers']} E={cfg['embedding_size']} V={cfg['vocab_size']}, {result['source']} "
        f"batches {result['batch_size']} x {result['seq_len']} ({result['predictions']} predictions), "
        f"{result['steps']} steps, AdamW lr {result['lr']:g} (warm-up {result['warmup']}, {schedule}), "
        f"weight decay {result['weight_decay']:g}, clip {result['clip']:g}, fp32, dropout off; "
        f"{result['seconds']:.0f} s"
    )
    tail = [f"against transformers: {_figures(result)}"]
    if result["control"]:
        tail.append(f"noise floor, against ours from a start 1 ulp away: {_figures(result['control'])}")
    tail.append(f"training moved the weights by up to {result['param_max_change']:.2e}")
    return "\n".join([head, *lines, *tail])


def _figures(fig: dict[str, Any]) -> str:
    return (
        f"largest per-step loss difference {fig['max_loss_diff']:.2e} (step {fig['max_loss_diff_step']}, "
        f"relative {fig['max_rel_loss_diff']:.1e}); largest parameter difference {fig['param_max_diff']:.2e} "
        f"({fig['param_max_diff_key']}), {fig['param_max_diff_elsewhere']:.1e} in any other tensor"
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default="tiny", help="preset (tiny, base, ...) or config JSON file")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=64, help="random batches only")
    parser.add_argument(
        "--predictions", type=int, default=10, help="masked positions per row (random batches)"
    )
    parser.add_argument("--lr", type=float, default=1e-3, help="peak learning rate")
    parser.add_argument("--warmup", type=int, default=10, help="linear warm-up steps")
    parser.add_argument(
        "--decay", action="store_true", help="linear decay to 0 after warm-up (default: constant)"
    )
    parser.add_argument("--weight-decay", type=float, default=0.01)
    parser.add_argument(
        "--clip", type=float, default=1.0, help="gradient clipping at this global norm; 0 = none"
    )
    parser.add_argument(
        "--instances", metavar="DIR", default=None, help="real batches from an instance folder"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--control",
        action="store_true",
        help="also train ours from a start 1 ulp away: the noise floor of the differences (+50%% time)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch intra-op threads (default 1: fastest for small models on a shared CPU; 0 = torch's)",
    )
    add_json_argument(parser)


def run(args: argparse.Namespace) -> int:
    result = run_parity(
        config=args.config,
        steps=args.steps,
        batch_size=args.batch_size,
        seq_len=args.seq_len,
        predictions=args.predictions,
        lr=args.lr,
        warmup=args.warmup,
        decay=args.decay,
        weight_decay=args.weight_decay,
        clip=args.clip,
        instances=args.instances,
        seed=args.seed,
        control=args.control,
        threads=args.threads,
        log=lambda msg: print(msg, file=sys.stderr, flush=True),
    )
    return report(result, format_table(result), args.json)


if __name__ == "__main__":
    module_main("benchmarks.parity", __doc__, add_arguments, run)

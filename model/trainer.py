"""ALBERT pretraining: one readable training step, wrapped by data, checkpoints and logging.

    albert pretrain --instances DIR --config tiny --out runs/ID [--steps N --batch-size B --lr LR ...]

Run it again with the same command and it resumes from the newest valid checkpoint in runs/ID
(model, optimizer, schedule, RNG states and data position), ending with exactly the parameters of an
uninterrupted run.

The step (`Trainer.train_step`), for a global batch of B sequences = world x accumulation micro-batches:

    lr = schedule(step)                                   warmup, then linear decay to 0 from step 0
    W, N = all-reduced number of real MLM predictions and of sequences in the global batch
    for each micro-batch (no gradient sync but on the last):
        loss = world * (sum_w(CE_mlm) / W + sum(CE_sop) / N)  ->  backward
    (so the averaged gradient is exactly that of one batch of B, whatever the split)
    norm = clip_grad_norm_(1.0);  non-finite loss or norm -> skip the update (counted; 5 in a row stop)
    optimizer.step()

The loop (`Trainer.fit`) asks small objects what to do: a MetricsWindow (model/metrics.py) for the
train records, a Cadence for when to log, evaluate and save, a StopRequest for a signal or the time
budget (a monotonic clock, read every step), a DivergenceGuard for the streak of skipped steps
(model/train_loop.py). SIGTERM or SIGINT finishes the step in flight, saves it and raises Interrupted
(`albert pretrain` exits 143 or 130; docs/trust-training.md). A checkpoint is the state dict of the
run's stateful parts (`Trainer.state`, model/train_state.py), written and read by model/checkpoint.py.

Outputs in runs/ID: checkpoints/step-N/ (model.checkpoint), metrics.jsonl, TensorBoard events under
tb/, curves.png at the end, train_config.json (with the first checkpoint).

Before any work the inputs are checked (model/train_setup.py, docs/trust-training.md); then the run
folder is claimed (core.outdir: ours, new, or --force) and a write probed. A resumed run must see
the same data (content id), the same vocabulary and the same settings as its checkpoint.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys

import torch

from core import lock, storage
from core.errors import UserError
from model import checkpoint as ckpt
from model import distributed
from model.albert import AlbertForPreTraining
from model.device import make_deterministic, manual_seed, resolve_device, to_device
from model.metrics import MetricsLog, MetricsWindow, plot_curves, progress_line, read_metrics
from model.optim import Schedule, build_optimizer
from model.tpu import graph_cut
from model.train_config import TrainConfig
from model.train_loop import Cadence, DivergenceGuard, StopRequest, TrainClock
from model.train_setup import (
    build_model_config,
    check_first_records,
    check_init_vocabulary,
    check_resumable,
    check_token_ids,
    claim_run_folder,
    micro_batch_plan,
    run_vocabulary,
    unigram_output_bias,
)
from model.train_state import DataPosition, ModelState, OptimizerState, Progress, RNGState


class Trainer:
    def __init__(self, cfg: TrainConfig):
        from model.data import NoSplit, find_instances

        cfg.check()
        self.cfg, training = cfg, cfg.training
        self.device = resolve_device(cfg.runtime.device)
        if cfg.runtime.deterministic:
            make_deterministic()
        self.dist = distributed.init(self.device.type)
        if self.device.type == "cuda" and self.dist.enabled:
            self.device = torch.device("cuda", self.dist.local_rank)
        bf16 = training.precision == "bf16" or (training.precision == "auto" and self.device.type != "cpu")
        self.precision = "bf16" if bf16 else "fp32"

        # The inputs, checked before anything is written.
        self.train_data = find_instances(cfg.instances, "train")
        self.spm_path = run_vocabulary(cfg, self.train_data)
        vocab_size = None
        if self.spm_path:
            from core.tokenizer import Tokenizer

            vocab_size = Tokenizer.load(self.spm_path).vocab_size
        self.config = build_model_config(cfg, vocab_size, self.spm_path)
        self.vocab_label = self.spm_path or f"the vocab_size of --config {cfg.model.model}"
        if self.train_data.max_seq_length > self.config.max_position_embeddings:
            raise UserError(
                f"instances have length {self.train_data.max_seq_length} > max_position_embeddings "
                f"{self.config.max_position_embeddings}"
            )
        check_first_records(self.train_data, self.config.vocab_size, cfg.instances, self.vocab_label)
        self.micro, self.accum, self.memory_note = micro_batch_plan(
            cfg, self.config, self.train_data, self.device, self.dist.world_size, self.precision
        )
        try:  # a missing eval split is allowed; a damaged or partly copied one is not
            self.eval_data = find_instances(cfg.instances, "eval") if storage.isdir(cfg.instances) else None
        except NoSplit:
            self.eval_data = None
        init = cfg.model.init_checkpoint
        if init:
            check_init_vocabulary(init, self.spm_path)
        # The run folder: ours and writable (main rank; the others learn of a refusal and stop too).
        distributed.on_main(lambda: claim_run_folder(cfg.out, cfg.checkpoint.force), self.dist)

        torch.manual_seed(training.seed)  # the same initial weights on every rank
        self.model = AlbertForPreTraining(self.config)
        if init:
            from model.convert import load_state, read_checkpoint

            init_config, weights, _ = read_checkpoint(init)
            if init_config.vocab_size != self.config.vocab_size:
                raise UserError(
                    f"--init-checkpoint has vocab_size {init_config.vocab_size}, this run {self.config.vocab_size}"
                )
            load_state(self.model, weights, source=init)
        elif cfg.model.output_bias_init == "unigram" and not ckpt.list_steps(cfg.out):
            # Not when resuming: the checkpoint's weights replace it.
            unigram_output_bias(self.model, self.train_data, self.config.vocab_size)
        to_device(self.model, self.device)  # tied weights kept tied (XLA)
        self.wrapped = distributed.wrap(self.model, self.dist, cfg.runtime.parallel, self.device)
        self.forward = torch.compile(self.wrapped) if cfg.runtime.compile else self.wrapped
        optim = cfg.optim
        self.optimizer = build_optimizer(self.model, optim.optimizer, optim.lr, optim.weight_decay)
        self.schedule = Schedule(optim.lr, optim.warmup_steps, training.steps)
        dev_type = self.device.type if self.device.type in ("cuda", "xla") else "cpu"
        self.cut_graph = graph_cut(self.device)  # XLA: run the traced graph here (model/tpu.py)
        self.gradient_mean = distributed.xla_gradient_mean(self.dist, self.device, self.cut_graph)
        self.autocast = (
            (lambda: torch.autocast(dev_type, dtype=torch.bfloat16)) if bf16 else contextlib.nullcontext
        )
        logs, saves = cfg.logging, cfg.checkpoint
        self.cadence = Cadence(training.steps, logs.log_every, logs.eval_every, saves.save_every)

        # Everything a checkpoint holds and a resume restores, by name (model/train_state.py).
        self.progress, self.data = Progress(), DataPosition()
        self.clock = TrainClock(self.progress)
        abort = (  # a second Ctrl-C (model/train_loop.py)
            "albert pretrain: interrupted: stopped at once by a second Ctrl-C (SIGINT), without a "
            "checkpoint; rerun the same command to resume from the last one"
        )
        self.stop = StopRequest(cfg.runtime.max_minutes, self.clock, self.dist.is_main, abort)
        self.state = {
            "model": ModelState(self.model),
            "optimizer": OptimizerState(self.model, self.optimizer),
            "schedule": self.schedule,
            "progress": self.progress,
            "data": self.data,
            "rng": RNGState(),
        }
        self.resumed_from = None
        # The run folder's logs (metrics.jsonl, tb/, curves.png), written by the main rank; a local
        # working copy when the folder is a URL (storage.Mirror).
        self.files = storage.Mirror(cfg.out) if self.dist.is_main else None
        manual_seed(self.device, training.seed + 1000 * self.dist.rank)  # dropout streams differ per rank
        self._resume()

    @property
    def step(self) -> int:
        return self.progress.step

    @step.setter
    def step(self, value: int) -> None:
        self.progress.step = value

    @property
    def position(self):
        """The data position after the last batch taken (model.data.Position)."""
        return self.data.position

    # -- resume / save -----------------------------------------------------------------------------

    def _resume(self) -> None:
        path = ckpt.latest(self.cfg.out)
        if path is None:
            # A fresh run. The settings lock with the first checkpoint (train_config.json is written
            # with it): a run that failed before one can be rerun with corrected options. The log of
            # such a run is dropped, not continued.
            if self.files is not None and os.path.exists(self.files.path("metrics.jsonl")):
                os.remove(self.files.path("metrics.jsonl"))
            return
        loaded = ckpt.load(path)
        warning = check_resumable(
            self.cfg, path, loaded.trainer, self.train_data.content_id, self.config, self.spm_path,
            self.dist.world_size,
        )  # fmt: skip
        if warning and self.dist.is_main:
            print(warning, file=sys.stderr, flush=True)
        state = loaded.state(self.dist.rank)
        for name, part in self.state.items():
            part.load_state_dict(state[name])
        self.resumed_from = path
        if self.files is not None:  # main rank: continue metrics.jsonl, minus what came after the checkpoint
            self.files.pull("metrics.jsonl")
            metrics = self.files.path("metrics.jsonl")
            rows = [r for r in read_metrics(metrics) if r.get("step", 0) <= self.step]
            with open(metrics, "w", encoding="utf-8") as f:
                f.writelines(json.dumps(r) + "\n" for r in rows)

    def save(self) -> str:
        """Gather every part's state (collective), write step-N on rank 0, wait for it."""
        state = {name: part.state_dict() for name, part in self.state.items()}
        own = {name: state.pop(name) for name in ("data", "rng")}  # each rank's own parts
        ranks = distributed.all_gather_objects(own, self.dist)
        path = None
        if self.dist.is_main:
            config_json = {**self.config.to_hf_dict(), "architectures": ["AlbertForPreTraining"]}
            data = {"instances": self.cfg.instances, "content_id": self.train_data.content_id}
            path = ckpt.save_state(
                self.cfg.out,
                state,
                ranks,
                config_json=config_json,
                about={"train_config": self.cfg.to_dict(), "data": data},
                spm_model=self.spm_path,
                keep=self.cfg.checkpoint.keep_last,
            )
            # The run's settings, for people and for `outdir` (a run folder); they lock from now on.
            storage.write_json(storage.join(self.cfg.out, "train_config.json"), self.cfg.to_dict(), indent=1)
        distributed.barrier(self.dist)
        return path or ckpt.step_dir(self.cfg.out, self.step)

    # -- data --------------------------------------------------------------------------------------

    def _batches(self):
        """This rank's batches of the train split as (batch, Position after it), from the data position."""
        from model.data import InstanceStream, make_loader

        stream = InstanceStream(
            self.train_data,
            self.micro,
            seed=self.cfg.training.seed,
            shuffle_window=self.cfg.data.shuffle_window,
            rank=self.dist.rank,
            world_size=self.dist.world_size,
            start=self.data.position,
        )
        # Host batches on every device: the step reads its normalisers off them (train_step).
        return iter(make_loader(stream, self.cfg.data.num_workers, pin_memory=self.device.type == "cuda"))

    def _next_micro_batches(self, batches) -> list[dict[str, torch.Tensor]]:
        """This rank's micro-batches of the next step (their token ids checked); moves the data position."""
        micro = []
        for _ in range(self.accum):
            batch, self.data.position = next(batches)
            check_token_ids(batch, self.config.vocab_size, self.cfg.instances, self.vocab_label)
            micro.append(batch)
        return micro

    def _eval_batches(self):
        """The first eval_batches batches of the eval split, in order. The stream repeats (epochs=None),
        so every rank runs the same number of forward passes (FSDP2's all-gathers are collective)."""
        from model.data import InstanceStream

        stream = InstanceStream(
            self.eval_data, self.micro, shuffle_window=0, rank=self.dist.rank, world_size=self.dist.world_size
        )
        return stream.batches()

    # -- the step ----------------------------------------------------------------------------------

    def micro_loss(self, batch: dict[str, torch.Tensor], predictions: float, sequences: float):
        """(loss to back-propagate, (sum of weighted MLM CE, MLM correct, sum of SOP CE, SOP correct))
        of one micro-batch: its share of the global batch's mean losses over `predictions` real MLM
        predictions and `sequences` sequences (so the ranks' averaged gradient is that of one batch)."""
        out = self.forward(**batch)
        mlm_sum = out.mlm_loss * out.mlm_weight  # sum of weighted CE of this micro-batch
        sop_sum = out.sop_loss * out.sop_count
        loss = self.dist.world_size * (mlm_sum / max(predictions, 1.0) + sop_sum / sequences)
        return loss, (mlm_sum, out.mlm_correct, sop_sum, out.sop_correct)

    def train_step(self, micro_batches: list[dict[str, torch.Tensor]]) -> dict[str, float]:
        """One optimizer step over the global batch (this rank's micro-batches). Returns its metrics."""
        lr = self.schedule.apply(self.optimizer, self.step)
        batches = [{k: v.to(self.device, non_blocking=True) for k, v in b.items()} for b in micro_batches]
        # Global normalisers: real predictions W and sequences N over all ranks and micro-batches.
        counts = torch.tensor(
            [
                float(sum(b["masked_lm_weights"].sum().item() for b in micro_batches)),
                float(sum(len(b["input_ids"]) for b in micro_batches)),
                float(sum(b["attention_mask"].sum().item() for b in micro_batches)),
            ],
            dtype=torch.float64,
        )
        distributed.all_reduce_sum(counts, self.dist)
        W, N, tokens = counts.tolist()
        on_device = []  # per micro-batch: mlm_sum, mlm_correct, sop_sum, sop_correct, bad loss (device)
        for index, batch in enumerate(batches):
            with distributed.no_sync(self.wrapped, index < len(batches) - 1), self.autocast():
                loss, parts = self.micro_loss(batch, W, N)
            loss.backward()
            bad = ~torch.isfinite(loss.detach())
            on_device.append(torch.stack([part.detach().float() for part in (*parts, bad)]))
        params = [p for p in self.model.parameters() if p.grad is not None]
        self.gradient_mean([p.grad for p in params])  # XLA in several processes (DDP does it elsewhere)
        clip = self.cfg.optim.clip_norm
        norm = torch.nn.utils.clip_grad_norm_(params, clip if clip > 0 else float("inf"))
        # Nothing above was read on the host: on XLA, forward, backward and clipping are one graph.
        self.cut_graph()
        sums = sum((part.cpu().double() for part in on_device), torch.zeros(5, dtype=torch.float64))
        # The stop votes (a signal here, rank 0's clock) ride on this all-reduce: all ranks agree.
        sums = torch.cat([sums, torch.tensor(self.stop.votes(), dtype=torch.float64)])
        distributed.all_reduce_sum(sums, self.dist)
        mlm_sum, mlm_correct, sop_sum, sop_correct, bad_loss, *votes = sums.tolist()
        norm = float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)
        finite = bad_loss == 0 and math.isfinite(norm)
        if finite:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.cut_graph()  # XLA: the optimizer update, a second graph
        return {
            "loss": (mlm_sum / max(W, 1.0) + sop_sum / N) if finite else float("nan"),
            "mlm_loss": mlm_sum / max(W, 1.0),
            "sop_loss": sop_sum / N,
            "mlm_acc": mlm_correct / max(W, 1.0),
            "sop_acc": sop_correct / N,
            "lr": lr,
            "grad_norm": norm,
            "finite": finite,
            "tokens": tokens,
            "sequences": N,
            "predictions": W,
            "stop": StopRequest.agreed(votes),
        }

    # -- the loop ----------------------------------------------------------------------------------

    def fit(self) -> dict:
        steps, log = self.cfg.training.steps, MetricsLog(self.files, self.cfg.training.steps, self.step)
        self._announce(log)
        guard = DivergenceGuard(self.cfg.training.max_bad_steps, lambda: ckpt.latest(self.cfg.out))
        last_saved, stop = (self.step if self.resumed_from else None), None
        self.clock.restart()
        with contextlib.closing(log):
            # SIGTERM / SIGINT only set a flag in here (loader workers, forked after, ignore both).
            with self.stop.catching_signals():
                batches, window = self._batches(), MetricsWindow()
                while self.step < steps:
                    metrics = self.train_step(self._next_micro_batches(batches))
                    self.step += 1
                    self.progress.count(metrics)
                    guard.update(metrics["finite"], self.step, log.message)
                    window.add(metrics)
                    stop = None if guard.streak else metrics["stop"]  # a stop waits for the end of a streak
                    if stop:  # saved first: the step in flight is kept even if what follows fails
                        last_saved = self._save(log, quiet=bool(stop.signum))
                        self._raise_if_signalled(stop.signum)
                    if self.cadence.log(self.step):
                        seconds = self.clock.elapsed()
                        record = window.record(self.step, metrics["lr"], self.progress.skipped_steps, seconds)
                        log.write(record, progress_line(record, steps), advance=window.steps)
                        window = MetricsWindow()
                    if self.cadence.evaluate(self.step) and not stop:
                        self._log_eval(log)
                    if self.cadence.save(self.step) and not guard.streak and not stop:  # never mid-streak
                        last_saved = self._save(log)
                    if stop:
                        break
                if last_saved != self.step:  # the last step, saved before the final evaluation
                    self._save(log, quiet=bool(self.stop.signum))
                self._raise_if_signalled(self.stop.signum)  # a signal after the last step's votes
            # From here a signal stops at once (flows/cli.py's handlers are back): every step is saved.
            final_eval = self._log_eval(log)
            if self.files is not None:
                plot_curves(self.files.local)
        done = f"time budget of {self.cfg.runtime.max_minutes} min used up at step {self.step}"
        return {
            "step": self.step,
            "checkpoint": ckpt.step_dir(self.cfg.out, self.step),
            "stop": done if stop else "done",
            "eval": final_eval,
            **self.progress.counters(),
        }

    def _raise_if_signalled(self, signum: int) -> None:
        """After this step's checkpoint: Interrupted (one line, exit 128 + signum) if a signal came."""
        if signum:
            raise StopRequest.interrupted(signum, self.step, ckpt.step_dir(self.cfg.out, self.step))

    def _save(self, log: MetricsLog, quiet: bool = False) -> int:
        """A checkpoint of the step just done (train_seconds banked first); returns the step."""
        self.clock.bank()
        path = self.save()
        if not quiet:
            log.message(f"saved {path}")
        log.sync()
        return self.step

    def _announce(self, log: MetricsLog) -> None:
        cfg = self.cfg
        if self.resumed_from:
            log.message(f"resumed from {self.resumed_from} (step {self.step})")
        if self.memory_note:
            log.message(self.memory_note)
        if self.eval_data is None:
            why = "has no eval split" if storage.isdir(cfg.instances) else "names files, not a folder"
            log.message(f"training without evaluation: --instances {cfg.instances} {why}")
        log.message(
            f"model {self.model.num_parameters():,} parameters (vocab {self.config.vocab_size}), "
            f"{self.dist.world_size} rank(s) x {self.accum} micro-batch(es) of {self.micro} = batch "
            f"{cfg.training.batch_size}, L={self.train_data.max_seq_length}, {cfg.optim.optimizer} lr "
            f"{cfg.optim.lr}, {self.device} {self.precision}{' compiled' if cfg.runtime.compile else ''}"
            f"{' deterministic' if cfg.runtime.deterministic else ''}"
        )

    def evaluate(self) -> dict[str, float] | None:
        from model.evaluate import eval_sums, summarize

        if self.eval_data is None:
            return None
        # The unwrapped model: DDP's forward would sync buffers; FSDP2 shards the model in place.
        sums = eval_sums(
            self.model, self._eval_batches(), self.device, self.autocast, self.cfg.logging.eval_batches
        )
        totals = torch.tensor([sums[name] for name in sorted(sums)], dtype=torch.float64)  # over all ranks
        distributed.all_reduce_sum(totals, self.dist)
        return summarize(dict(zip(sorted(sums), totals.tolist())))

    def _log_eval(self, log: MetricsLog) -> dict | None:
        metrics = self.evaluate()
        if metrics is None:
            return None
        log.write({"kind": "eval", "step": self.step, **metrics})
        log.message(
            f"eval step {self.step}: mlm_acc {metrics['masked_lm_accuracy']:.4f} "
            f"sop_acc {metrics['sentence_order_accuracy']:.4f} loss "
            f"{metrics['masked_lm_loss'] + metrics['sentence_order_loss']:.4f}"
        )
        return metrics


@lock.scope()  # the run folder's lock (claim_run_folder) is held until the run ends
def train(cfg: TrainConfig) -> dict:
    """Build, resume if possible, train, save. Returns a summary (step, final checkpoint, counters)."""
    trainer = Trainer(cfg)
    try:
        summary = trainer.fit()
        return summary if trainer.dist.is_main else None
    finally:
        if trainer.files is not None:
            trainer.files.close()  # uploads what is left (a remote run folder), removes the copy
        distributed.shutdown()

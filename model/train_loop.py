"""The decisions of the training loop, each in a small object that `Trainer.fit` asks:

Cadence          after step s: log? evaluate? save?
TrainClock       seconds of training on a monotonic clock, banked into progress.train_seconds before
                 each checkpoint (so that it records them) and at the end
StopRequest      stop after the step in flight? (SIGTERM or SIGINT received, the time budget used up),
                 agreed by all ranks through the step's own all-reduce
DivergenceGuard  the streak of steps with a non-finite loss or gradient -> TrainingDiverged
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from core.errors import Interrupted, UserError
from model.train_state import Progress


class TrainingDiverged(UserError):
    """The loss or the gradient stayed non-finite for `max_bad_steps` steps in a row."""


@dataclass(frozen=True)
class Cadence:
    """When to log, evaluate and save, from the step just done."""

    steps: int
    log_every: int
    eval_every: int
    save_every: int

    def log(self, step: int) -> bool:
        return step % self.log_every == 0 or step == self.steps

    def evaluate(self, step: int) -> bool:
        """0 = only at the end (the final evaluation is not counted here)."""
        return bool(self.eval_every) and step % self.eval_every == 0 and step < self.steps

    def save(self, step: int) -> bool:
        """The last step is saved at the end of the run (`Trainer.fit`), not here."""
        return step % self.save_every == 0 and step < self.steps


class TrainClock:
    """Seconds of training: the run's banked progress.train_seconds (resumed ones included) plus the
    running segment. Measured with time.monotonic, never read off the wall clock: an NTP correction, a
    migrated VM or a resumed laptop moves time.time() by hours, which neither stops a run nor stretches
    its budget, nor lands in trainer.json."""

    def __init__(self, progress: Progress):
        self.progress = progress
        self.started = time.monotonic()

    def restart(self) -> None:
        """A new running segment from now (the start of `Trainer.fit`)."""
        self.started = time.monotonic()

    def elapsed(self) -> float:
        return self.progress.train_seconds + time.monotonic() - self.started

    def bank(self) -> None:
        """Add the running segment to progress.train_seconds (before a checkpoint records it)."""
        now = time.monotonic()
        self.progress.train_seconds += now - self.started
        self.started = now


# Signals that ask a run to stop with a checkpoint: how Prefect cancels a run, how Kubernetes and spot
# VMs preempt one (SIGTERM), and Ctrl-C (SIGINT).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@dataclass(frozen=True)
class Stop:
    """What all ranks agreed on after a step: `signum` (a signal reached some rank) or the budget."""

    signum: int = 0
    out_of_time: bool = False


class StopRequest:
    """Whether to stop after the step in flight, decided by every rank alike.

    Each rank votes in the step's own all-reduce (`Trainer.train_step` adds `votes()` to its sums, so
    the agreement costs no collective of its own): one vote per stop signal that reached this rank,
    and, on the rank that judges time (rank 0), one when the time budget is used up. `agreed` reads the
    summed votes: a signal on any rank stops them all, and a run stops at the same step on every rank.
    The clock is read every step, whatever --log-every is.

    While `catching_signals()` is active, SIGTERM and SIGINT only set `signum`; the loop finishes the
    step in flight, saves, and raises `Interrupted`. A repeated SIGTERM changes nothing (the stop is
    under way). A second Ctrl-C is a person who will not wait: the process prints `abort_line` and
    ends at once (exit 130), without a checkpoint and without unwinding, since an exception raised
    wherever the signal lands (inside a loader's transfer, a checkpoint write) would end in tracebacks
    from other threads; its loader workers are killed first, before they see a transfer cut short.
    What it leaves is safe: a checkpoint counts only once complete."""

    def __init__(self, max_minutes: float | None, clock: TrainClock, judges_time: bool, abort_line: str):
        self.max_seconds = None if max_minutes is None else max_minutes * 60
        self.clock, self.judges_time, self.abort_line = clock, judges_time, abort_line
        self.signum = 0

    def votes(self) -> list[float]:
        out_of_time = (
            self.judges_time and self.max_seconds is not None and self.clock.elapsed() > self.max_seconds
        )
        return [float(self.signum == s) for s in STOP_SIGNALS] + [float(out_of_time)]

    @staticmethod
    def agreed(summed: Sequence[float]) -> Stop | None:
        """The stop that the votes summed over all ranks ask for (None: go on). SIGTERM wins over
        SIGINT when both arrived."""
        signum = next((int(s) for s, n in zip(STOP_SIGNALS, summed) if n > 0), 0)
        out_of_time = summed[len(STOP_SIGNALS)] > 0
        return Stop(signum, out_of_time) if signum or out_of_time else None

    @staticmethod
    def interrupted(signum: int, step: int, checkpoint: str) -> Interrupted:
        """The error a signalled run raises once `checkpoint` (of `step`) is written: one line."""
        name = signal.Signals(signum).name
        return Interrupted(
            signum, f"{name} at step {step}: saved {checkpoint}; rerun the same command to resume"
        )

    def _handle(self, signum: int, frame) -> None:
        if self.signum and signum == signal.SIGINT:
            for worker in multiprocessing.active_children():
                worker.kill()
            print(self.abort_line, file=sys.stderr, flush=True)
            os._exit(128 + signum)
        self.signum = self.signum or signum

    @contextlib.contextmanager
    def catching_signals(self) -> Iterator[StopRequest]:
        """SIGTERM and SIGINT set `signum` while this is active (main thread only: elsewhere Python
        cannot set handlers, and the signals keep their handlers); the previous handlers come back
        after."""
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = {s: signal.signal(s, self._handle) for s in STOP_SIGNALS}
        try:
            yield self
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)


class DivergenceGuard:
    """Counts consecutive steps whose update was skipped (non-finite loss or gradient norm); stops the
    run at `max_bad_steps` of them, without writing a checkpoint of the bad state."""

    def __init__(self, max_bad_steps: int, last_good: Callable[[], str | None]):
        self.max_bad_steps = max_bad_steps
        self.last_good = last_good  # the newest valid checkpoint, for the message
        self.streak = 0

    def update(self, finite: bool, step: int, say: Callable[[str], None]) -> None:
        if finite:
            self.streak = 0
            return
        self.streak += 1
        say(f"step {step}: non-finite loss or gradient, update skipped ({self.streak} in a row)")
        if self.streak < self.max_bad_steps:
            return
        good = self.last_good()
        # The settings lock with the first checkpoint: a lower --lr reruns in place only when there is
        # none yet.
        how = (
            f"Last good checkpoint: {good}. Lower --lr in a new --out (--init-checkpoint "
            f"{good} to start from its weights), or check the data."
            if good
            else "No checkpoint yet: rerun with a lower --lr, or check the data."
        )
        raise TrainingDiverged(
            f"loss/gradient non-finite for {self.streak} steps in a row (steps "
            f"{step - self.streak + 1}-{step}); stopped without writing a checkpoint. " + how
        )

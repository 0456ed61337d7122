"""The decisions of the training loop, each in a small object that `Trainer.fit` asks:

Cadence          after step s: log? evaluate? save? look at the clock (the time budget)?
TrainClock       seconds of training, banked into progress.train_seconds before each checkpoint
                 (so that it records them) and at the end
DivergenceGuard  the streak of steps with a non-finite loss or gradient -> TrainingDiverged
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from model.train_state import Progress
from pipelines.core.errors import UserError


class TrainingDiverged(UserError):
    """The loss or the gradient stayed non-finite for `max_bad_steps` steps in a row."""


@dataclass(frozen=True)
class Cadence:
    """When to log, evaluate, save and check the time budget, from the step just done."""

    steps: int
    log_every: int
    eval_every: int
    save_every: int
    max_minutes: float | None

    def log(self, step: int) -> bool:
        return step % self.log_every == 0 or step == self.steps

    def evaluate(self, step: int) -> bool:
        """0 = only at the end (the final evaluation is not counted here)."""
        return bool(self.eval_every) and step % self.eval_every == 0 and step < self.steps

    def save(self, step: int) -> bool:
        """The last step is saved after the final evaluation, not here."""
        return step % self.save_every == 0 and step < self.steps

    def check_time(self, step: int) -> bool:
        """With a budget, the clock is read (and agreed on by all ranks) at the logging steps."""
        return self.max_minutes is not None and step % self.log_every == 0

    def over_budget(self, seconds: float) -> bool:
        return self.max_minutes is not None and seconds > self.max_minutes * 60


class TrainClock:
    """Seconds of training: the run's banked progress.train_seconds (resumed ones included) plus the
    running segment."""

    def __init__(self, progress: Progress):
        self.progress = progress
        self.started = time.time()

    def elapsed(self) -> float:
        return self.progress.train_seconds + time.time() - self.started

    def bank(self) -> None:
        """Add the running segment to progress.train_seconds (before a checkpoint records it)."""
        now = time.time()
        self.progress.train_seconds += now - self.started
        self.started = now


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

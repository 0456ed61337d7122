"""Progress of one `albert finetune` command, as pretraining prints it: which model of how many is
training, its step, the time so far and an estimate of the time left for the whole command.

    [peoples-daily-ner] model 3/10 pretrained (lr 3e-4, warm-up 0.1, seed 12345): step 50/250 loss 0.41
        dev entity_f1 0.45 (best 0.45) | elapsed 0:02:31, ETA 0:08:10

In a flow, the fine-tuning stage is several such commands in a row (a task after another, the candidate
and then production): inside `stage(commands)` each command's lines also say which command of the
stage it is, and the ETA covers the stage, the commands still to come priced at the mean duration of
the finished ones (before any finished: at this command's own expected duration).

The command's runs are known before the first one starts (the search grid of each neural model on the
first seed, then the other seeds at the setting chosen), and so is each run's planned step count
(epochs x batches per epoch). Early stopping ends most runs sooner, so the estimate scales the planned
steps of the runs still to come by the fraction of their plan that the finished runs used, and prices a
step at the wall time per step measured so far (evaluation and prediction included).
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field


def clock(seconds: float) -> str:
    """1234.5 -> '0:20:34' (as the pretraining log writes its ETA)."""
    seconds = max(0, int(round(seconds)))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


@dataclass
class FinetuneProgress:
    """Counts the command's runs and steps; `line` prefixes a run's log line and appends the times.

    planned: the planned steps of every run, in the order they will run."""

    task: str
    planned: list[int]
    log: Callable[[str], None] = print
    started: float = field(default_factory=lambda: time.time())
    done_steps: int = 0  # steps of the finished runs
    used: list[float] = field(default_factory=list)  # each finished run's steps / its planned steps
    current: int = -1  # index of the run in progress (or of the last one, once it ended)
    running: bool = False
    label: str = ""
    step: int = 0  # steps of the run in progress
    stage: FinetuneStage | None = None  # the flow's fine-tuning stage this command is part of
    command: int = 0  # this command's number in the stage

    def __post_init__(self):
        self.stage = self.stage or _STAGE.get()
        if self.stage is not None:
            self.command = self.stage.begin()

    def finish(self) -> None:
        """The command is done: its duration goes to the stage's estimate."""
        if self.stage is not None:
            self.stage.end(time.time() - self.started)

    @property
    def runs(self) -> int:
        return len(self.planned)

    def start_run(self, label: str) -> None:
        """The next run begins; `label` names its model and setting ("pretrained (lr 3e-4, ...)")."""
        self.current, self.label, self.step, self.running = self.current + 1, label, 0, True
        if self.current >= self.runs:  # a run nobody planned: count it rather than fail
            self.planned.append(self.planned[-1] if self.planned else 1)

    def update(self, step: int) -> None:
        self.step = step

    def end_run(self) -> None:
        planned = max(1, self.planned[self.current])
        self.used.append(min(1.0, self.step / planned))
        self.done_steps += self.step
        self.step, self.running = 0, False

    def eta(self) -> float | None:
        """Seconds left for the whole command (None before the first step)."""
        steps = self.done_steps + self.step
        if steps == 0:
            return None
        per_step = (time.time() - self.started) / steps
        fraction = sum(self.used) / len(self.used) if self.used else 1.0
        left = fraction * sum(self.planned[self.current + 1 :])  # the runs still to start
        if self.running:  # the run in progress: its expected steps, at least the ones it is on
            left += max(0.0, fraction * self.planned[self.current] - self.step)
        return per_step * left

    def times(self) -> str:
        eta, elapsed = self.eta(), time.time() - self.started
        if self.stage is not None and eta is not None:  # the stage's time left
            eta += self.stage.left_after(elapsed + eta)
        where = "the stage's " if self.stage is not None else ""
        return f"elapsed {clock(elapsed)}, {where}ETA {'?' if eta is None else clock(eta)}"

    def line(self, text: str) -> None:
        """Log `text` about the run in progress, with which run it is and the times."""
        where = f"command {self.command}/{self.stage.commands} " if self.stage is not None else ""
        self.log(
            f"[{where}{self.task}] model {self.current + 1}/{self.runs} {self.label}: {text} | {self.times()}"
        )


@dataclass
class FinetuneStage:
    """A flow's fine-tuning stage: `commands` fine-tuning commands in a row (`stage`)."""

    commands: int
    durations: list[float] = field(default_factory=list)  # of the finished (or skipped) commands
    current: int = 0  # commands started

    def begin(self) -> int:
        """A command starts: its number in the stage (1-based)."""
        self.current += 1
        return self.current

    def end(self, seconds: float) -> None:
        self.durations.append(seconds)

    def skip(self) -> None:
        """A command of the plan that did not run (its result was reused): counts as done, costs 0."""
        self.current += 1
        self.durations.append(0.0)

    def left_after(self, this_command: float) -> float:
        """Seconds of the commands after the current one: each at the mean of the finished ones that
        ran, or at `this_command` (the current one's expected duration) before any did."""
        ran = [d for d in self.durations if d > 0]
        each = sum(ran) / len(ran) if ran else this_command
        return max(0, self.commands - self.current) * each


_STAGE: contextvars.ContextVar[FinetuneStage | None] = contextvars.ContextVar("finetune_stage", default=None)


@contextlib.contextmanager
def stage(commands: int) -> Iterator[FinetuneStage]:
    """The fine-tuning commands run inside report their place in the stage and the stage's ETA."""
    token = _STAGE.set(FinetuneStage(commands))
    try:
        yield _STAGE.get()
    finally:
        _STAGE.reset(token)


def current_stage() -> FinetuneStage | None:
    return _STAGE.get()

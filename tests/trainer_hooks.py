"""Test hooks of the trainer, kept out of the product: monkeypatches of model.trainer.Trainer, applied
in the test's process or, through this module as the launcher, in an `albert` subprocess.

    inject_nan(monkeypatch, steps)              the loss is NaN at these steps (0-based: trainer.step
                                                before the update), so their updates are skipped
    sleep_after(monkeypatch, step, seconds)     pause once `step` steps are done (logged, saved if due),
                                                so a test can kill or signal the process at a known
                                                point; a stop signal (SIGTERM, SIGINT) ends the pause,
                                                and the step in flight then runs as usual
    hold_after(monkeypatch, step, marker)       pause once `step` steps are done until the process
                                                ends; at the first stop signal, write the file `marker`
                                                (a test then knows the signal was handled: two signals
                                                sent before the process runs arrive as one)
    jump_clock(monkeypatch, step, seconds)      the wall clock (time.time, for the whole process) jumps
                                                by `seconds` once `step` steps are done: an NTP
                                                correction, a migrated VM, a resumed laptop

    python -m tests.trainer_hooks [--nan-steps 3,4] [--sleep-after STEP:SECONDS] [--hold-after STEP:MARKER]
        [--jump-clock STEP:SECONDS]
        pretrain --instances ...
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterable

import pytest

from model.trainer import Trainer

_micro_loss = Trainer.micro_loss


def inject_nan(monkeypatch: pytest.MonkeyPatch, steps: Iterable[int]) -> None:
    steps = set(steps)

    def micro_loss(self, *args):
        loss, parts = _micro_loss(self, *args)
        return (loss * float("nan") if self.step in steps else loss), parts

    monkeypatch.setattr(Trainer, "micro_loss", micro_loss)


def sleep_after(monkeypatch: pytest.MonkeyPatch, step: int, seconds: float) -> None:
    inner = Trainer.train_step

    def train_step(self, micro_batches):
        if self.step == step:
            end = time.monotonic() + seconds
            while time.monotonic() < end and not self.stop.signum:
                time.sleep(0.02)
        return inner(self, micro_batches)

    monkeypatch.setattr(Trainer, "train_step", train_step)


def hold_after(monkeypatch: pytest.MonkeyPatch, step: int, marker: str) -> None:
    inner = Trainer.train_step

    def train_step(self, micro_batches):
        if self.step == step:
            while not self.stop.signum:
                time.sleep(0.02)
            open(marker, "w").close()
            time.sleep(300)  # a second Ctrl-C ends the process; a trainer that ignored it goes on after this
        return inner(self, micro_batches)

    monkeypatch.setattr(Trainer, "train_step", train_step)


def jump_clock(monkeypatch: pytest.MonkeyPatch, step: int, seconds: float) -> None:
    inner, wall, offset = Trainer.train_step, time.time, [0.0]

    def train_step(self, micro_batches):
        if self.step == step:
            offset[0] = seconds
        return inner(self, micro_batches)

    monkeypatch.setattr(Trainer, "train_step", train_step)
    monkeypatch.setattr(time, "time", lambda: wall() + offset[0])


def _step_and_seconds(text: str) -> tuple[int, float]:
    step, seconds = text.split(":")
    return int(step), float(seconds)


def launcher(
    nan_steps: Iterable[int] = (),
    sleep: tuple[int, float] | None = None,
    jump: tuple[int, float] | None = None,
    hold: tuple[int, str] | None = None,
) -> tuple[str, ...]:
    """What follows the interpreter to run `albert` with these hooks (instead of `-m flows.cli`)."""
    hooks = ["--nan-steps", ",".join(map(str, nan_steps))] if nan_steps else []
    if sleep:
        hooks += ["--sleep-after", f"{sleep[0]}:{sleep[1]}"]
    if jump:
        hooks += ["--jump-clock", f"{jump[0]}:{jump[1]}"]
    if hold:
        hooks += ["--hold-after", f"{hold[0]}:{hold[1]}"]
    return ("-m", "tests.trainer_hooks", *hooks)


def main(argv: list[str] | None = None) -> int:
    from flows.cli import main as albert

    p = argparse.ArgumentParser(prog="python -m tests.trainer_hooks", allow_abbrev=False)
    p.add_argument("--nan-steps", type=lambda s: [int(x) for x in s.split(",")], default=[])
    p.add_argument("--sleep-after", type=_step_and_seconds)
    p.add_argument("--jump-clock", type=_step_and_seconds)
    p.add_argument("--hold-after", type=lambda s: (int(s.split(":", 1)[0]), s.split(":", 1)[1]))
    p.add_argument("albert", nargs=argparse.REMAINDER, help="the `albert` command line")
    args = p.parse_args(argv)
    with pytest.MonkeyPatch.context() as mp:
        if args.nan_steps:
            inject_nan(mp, args.nan_steps)
        if args.sleep_after:
            sleep_after(mp, *args.sleep_after)
        if args.hold_after:
            hold_after(mp, *args.hold_after)
        if args.jump_clock:
            jump_clock(mp, *args.jump_clock)
        return albert(args.albert)


if __name__ == "__main__":
    sys.exit(main())

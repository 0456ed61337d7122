"""CPU time and peak memory of a command's whole process tree (`run_measured`), for `albert bench scale`.

Beam's DirectRunner in multi_processing mode starts its workers as subprocesses that their parent may
never wait for, so `getrusage(RUSAGE_CHILDREN)` alone can miss their CPU time. Two measures are taken:
  - `rusage_cpu_s`: the RUSAGE_CHILDREN delta around the waited command: exact for every process
    of the tree that was reaped by its parent, blind to the others;
  - `polled_cpu_s`: the tree is polled with psutil every `interval` seconds; each process's own
    user + system time, last seen, summed over every process ever seen: blind to at most the last
    interval of each process.
`cpu_s` is the larger of the two (both are lower bounds of the truth).

Peak memory per process is its own high-water mark (VmHWM from /proc, read at each poll, so exact even
between polls), or the largest RSS polled where /proc is not there; `sum_peak_rss` is the largest sum
of the RSS of the live processes at one poll (the whole tree's footprint at its worst moment), and at
least the largest peak of one process (which may fall between two polls).
"""

from __future__ import annotations

import contextlib
import os
import resource
import subprocess
import time
from dataclasses import dataclass, field

import psutil


@dataclass
class ProcessPeak:
    """One process of the tree: its peak RSS (bytes) and CPU seconds (user + system), last seen."""

    pid: int
    name: str
    peak_rss: int = 0
    cpu_s: float = 0.0


@dataclass
class TreeFigures:
    """What `run_measured` saw of one command. `root` is the command's own process; `workers` every
    descendant (Beam's SDK workers and whatever they start)."""

    returncode: int
    wall_s: float
    rusage_cpu_s: float
    polled_cpu_s: float
    root: ProcessPeak
    workers: list[ProcessPeak] = field(default_factory=list)
    sum_peak_rss: int = 0
    samples: int = 0

    @property
    def cpu_s(self) -> float:
        return max(self.rusage_cpu_s, self.polled_cpu_s)

    @property
    def max_worker_rss(self) -> int:
        return max((w.peak_rss for w in self.workers), default=0)


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _high_water_mark(pid: int) -> int:
    """The process's peak RSS in bytes from /proc/PID/status (VmHWM), 0 where it cannot be read."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024  # kB
    return 0


class TreeSampler:
    """Polls a process and all its descendants; remembers every process it has seen, keyed by
    (pid, start time) so a reused pid is a new process."""

    def __init__(self, root_pid: int):
        self.root_pid = root_pid
        self.root = psutil.Process(root_pid)
        self.root_key = (root_pid, self.root.create_time())
        self.seen: dict[tuple[int, float], ProcessPeak] = {}
        self.handles: dict[tuple[int, float], psutil.Process] = {}
        self.sum_peak_rss = 0
        self.samples = 0

    def _live(self) -> list[psutil.Process]:
        procs = {}
        with contextlib.suppress(psutil.Error):
            procs[self.root_key] = self.root
            for child in self.root.children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    procs[(child.pid, child.create_time())] = child
        # Orphans (a parent that exited without waiting) leave the tree: keep polling them.
        for key, handle in self.handles.items():
            if key not in procs and handle.is_running():
                procs[key] = handle
        return list(procs.items())

    def sample(self) -> int:
        """One poll; returns how many processes were alive."""
        total, alive = 0, 0
        for key, proc in self._live():
            try:
                with proc.oneshot():
                    rss = proc.memory_info().rss
                    times = proc.cpu_times()
                    name = proc.name()
                    if proc.status() == psutil.STATUS_ZOMBIE:
                        continue
            except psutil.Error:
                continue
            entry = self.seen.get(key)
            if entry is None:
                entry = self.seen[key] = ProcessPeak(key[0], name)
                self.handles[key] = proc
            entry.peak_rss = max(entry.peak_rss, rss, _high_water_mark(key[0]))
            entry.cpu_s = max(entry.cpu_s, times.user + times.system)
            total += rss
            alive += 1
        self.sum_peak_rss = max(self.sum_peak_rss, total)
        self.samples += 1
        return alive


def run_measured(
    cmd: list[str],
    *,
    env: dict | None = None,
    cwd: str | None = None,
    log_path: str | None = None,
    interval: float = 0.15,
    orphan_grace_s: float = 30.0,
) -> TreeFigures:
    """Run `cmd` (its output to `log_path`, or discarded), poll its process tree until it and every
    descendant seen have exited (orphans for at most `orphan_grace_s` more), and return the figures."""
    log = open(log_path, "wb") if log_path else subprocess.DEVNULL  # noqa: SIM115
    try:
        before = _children_cpu()
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT)
        try:
            sampler = TreeSampler(proc.pid)
        except psutil.Error:  # already gone: nothing to poll
            sampler = None
        while proc.poll() is None:
            if sampler:
                sampler.sample()
            time.sleep(interval)
        wall = time.perf_counter() - started
        rusage = _children_cpu() - before
        deadline = time.perf_counter() + orphan_grace_s
        while sampler and time.perf_counter() < deadline and sampler.sample():
            time.sleep(interval)
    finally:
        if log_path:
            log.close()
    seen = dict(sampler.seen) if sampler else {}
    root = seen.pop(sampler.root_key, None) if sampler else None
    root = root or ProcessPeak(proc.pid, os.path.basename(cmd[0]))
    workers = sorted(seen.values(), key=lambda p: p.pid)
    return TreeFigures(
        returncode=proc.returncode,
        wall_s=wall,
        rusage_cpu_s=rusage,
        polled_cpu_s=root.cpu_s + sum(w.cpu_s for w in workers),
        root=root,
        workers=workers,
        # at least the largest single peak: a short-lived peak may fall between two polls
        sum_peak_rss=max(
            [sampler.sum_peak_rss if sampler else 0, root.peak_rss, *(w.peak_rss for w in workers)]
        ),
        samples=sampler.samples if sampler else 0,
    )

"""The cores this process may run on: what sets the threads of each rank (model/launch.py) and caps
them when the ranks of several agents share a host (model/distributed.py). A module of its own so that
both use it without one importing the other: the launcher builds on the trainer, which builds on
distributed."""

from __future__ import annotations

import os


def node_cores() -> int:
    """The cores this process may run on (its CPU affinity: a container's or taskset's share)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1

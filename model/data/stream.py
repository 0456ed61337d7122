"""The deterministic sharded stream of pretraining instances: batches of one rank, resumable exactly.

The stream (what one rank sees), for epoch e = 0, 1, 2, ...:

    files  -- permuted by rng(seed, e) (sorted order when shuffle_window <= 1)
    records of the files, in that order         global index g = 0, 1, ... (counted on across epochs)
    windows of `shuffle_window` records         window k permuted by rng(seed, e, k)
    the permuted records with g % world == rank  -> the rank's elements n = 0, 1, ... (across epochs)
    batches of `batch_size` elements            batch i = elements [i*b, (i+1)*b)
    loader worker w of W yields batches i with (i - first_batch) % W == w, so torch's DataLoader
    (round robin over workers) returns them in order i = first_batch, first_batch + 1, ...

So the global batch of a step (the rank batches of all ranks, or the micro-batches of gradient
accumulation) is the same set of records whatever the number of ranks, loader workers or
accumulation steps: a run on 2 ranks equals a run on one with the same global batch.

The shuffle is a window shuffle (fill a window, permute it, emit it) rather than a rolling buffer:
its state is a few counters, so the data position saved in a checkpoint is tiny and exact. Every batch
carries a `Position` (the bookmark of the window holding its first element: epoch, window, file index,
byte offset, element counters, plus the batch index); resuming from it re-reads at most one window.
All randomness is derived from (seed, epoch, window): there is no mutable RNG state to save.

Every rank and worker reads all the bytes of the stream (framing only) and decodes only its own
records. That keeps the global batch invariant; the framing costs ~1 µs per record.
"""

from __future__ import annotations

import atexit
import dataclasses
import multiprocessing.util  # noqa: F401  its exit hook is registered before ours (_stop_workers_at_exit)
import os
import signal
import weakref
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch

from core.errors import StorageFailed, UserError
from model.data.examples import TORCH_NAMES, RecordError, parse_examples, to_torch
from model.data.folders import InstanceFiles
from model.data.records import iter_records


@dataclass(frozen=True)
class Position:
    """Where a rank's stream is: the bookmark of a shuffle window and the next batch to produce.

    The stream restarts from here exactly (checkpointed as JSON)."""

    epoch: int = 0
    window: int = 0
    """Index of the window within the epoch."""
    file: int = 0
    """Index, in the epoch's file order, of the file where the window starts."""
    offset: int = 0
    """Byte offset in that file of the window's first record."""
    record: int = 0
    """Global index (all ranks, counted across epochs) of the window's first record."""
    element: int = 0
    """The rank's element counter (across epochs) at the window's start."""
    next_batch: int = 0
    """Index of the next batch to produce."""

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Position:
        return cls(**{f.name: int(d[f.name]) for f in dataclasses.fields(cls)})


def _mix(*values: int) -> list[int]:
    return [int(v) & 0xFFFFFFFF for v in values]


def file_order(num_files: int, seed: int, epoch: int, shuffle: bool) -> list[int]:
    if not shuffle:
        return list(range(num_files))
    return np.random.default_rng(_mix(seed, epoch, 0x46494C45)).permutation(num_files).tolist()


def window_order(size: int, seed: int, epoch: int, window: int, shuffle: bool) -> np.ndarray:
    if not shuffle:
        return np.arange(size)
    return np.random.default_rng(_mix(seed, epoch, window, 0x57494E44)).permutation(size)


class InstanceStream(torch.utils.data.IterableDataset):
    """Batches of one rank as (tensors, Position after the batch), see the module docstring.

    epochs=None streams forever (pretraining); epochs=1 with shuffle_window=0 is one ordered pass
    (evaluation), whose last batch may be short."""

    def __init__(
        self,
        data: InstanceFiles,
        batch_size: int,
        *,
        seed: int = 0,
        shuffle_window: int = 10_000,
        rank: int = 0,
        world_size: int = 1,
        start: Position | None = None,
        epochs: int | None = None,
        verify: bool = True,
        names: tuple[str, ...] = tuple(TORCH_NAMES),
        decode_chunk: int = 1024,
    ):
        super().__init__()
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} outside world of {world_size}")
        self.data, self.batch_size, self.seed = data, batch_size, seed
        self.shuffle = shuffle_window > 1
        self.window = shuffle_window if self.shuffle else 4096  # unshuffled: windows are only bookmarks
        self.rank, self.world_size = rank, world_size
        self.start = start or Position()
        self.epochs, self.verify, self.names = epochs, verify, names
        self.decode_chunk = decode_chunk
        """Records parsed per call (several batches at once)."""

    def _epoch_records(self, order: list[int], fi: int, offset: int) -> Iterator[tuple[bytes, int, int]]:
        """(record, file index, byte offset) of the records of one epoch from (fi, offset); the position
        returned with a record is that of the record after it."""
        for k in range(fi, len(order)):
            for data, nxt in iter_records(self.data.files[order[k]], offset if k == fi else 0, self.verify):
                yield data, k, nxt

    def _windows(self, start: Position) -> Iterator[tuple[tuple[int, int, int, int, int], list[bytes]]]:
        """((epoch, window, file, offset, record) bookmark, records) of each shuffle window from `start`."""
        files = self.data.files
        epoch, window, fi, offset, record = start.epoch, start.window, start.file, start.offset, start.record
        while self.epochs is None or epoch < self.epochs:
            order = file_order(len(files), self.seed, epoch, self.shuffle)
            bookmark, records, epoch_start = (epoch, window, fi, offset, record), [], record
            for data, k, nxt in self._epoch_records(order, fi, offset):
                records.append(data)
                if len(records) == self.window:
                    yield bookmark, records
                    record, window = record + len(records), window + 1
                    bookmark, records = (epoch, window, k, nxt, record), []
            if records:
                yield bookmark, records
                record += len(records)
            if record == epoch_start and fi == 0 and offset == 0:
                raise UserError(f"the instance files hold no records ({files[0]} ...)")
            epoch, window, fi, offset = epoch + 1, 0, 0, 0

    def batches(self, worker: int = 0, num_workers: int = 1) -> Iterator[tuple[dict, Position]]:
        """The batches of this rank that loader worker `worker` of `num_workers` produces."""
        batch_size, world, rank = self.batch_size, self.world_size, self.rank
        first = self.start.next_batch
        start = self.start
        element = start.element
        pending: list[bytes] = []  # records of the batch being filled
        pending_index, pending_mark = -1, None
        done: list[tuple[list[bytes], Position]] = []  # complete batches, decoded together
        for (epoch, window, fi, offset, record), records in self._windows(start):
            mark = Position(epoch, window, fi, offset, record, element, 0)
            perm = window_order(len(records), self.seed, epoch, window, self.shuffle)
            own = np.arange((rank - record) % world, len(records), world)  # g % world == rank
            for p in own.tolist():
                i = element // batch_size
                if i >= first and (i - first) % num_workers == worker:
                    if not pending:
                        pending_index, pending_mark = i, mark
                    pending.append(records[perm[p]])
                    if len(pending) == batch_size:
                        done.append((pending, dataclasses.replace(pending_mark, next_batch=i + 1)))
                        pending = []
                        if len(done) * batch_size >= self.decode_chunk:
                            yield from self._decode(done)
                            done = []
                element += 1
            if done:  # do not hold decoded-ready batches across a window read
                yield from self._decode(done)
                done = []
        if pending:  # a finite stream's last, short batch
            done.append((pending, dataclasses.replace(pending_mark, next_batch=pending_index + 1)))
        yield from self._decode(done)

    def _decode(self, batches: list[tuple[list[bytes], Position]]) -> Iterator[tuple[dict, Position]]:
        """Parse several batches in one call (numpy's per-call overhead amortised), then split them."""
        if not batches:
            return
        try:
            arrays = parse_examples([r for recs, _ in batches for r in recs], self.data.lengths, self.names)
        except RecordError as err:
            raise RecordError(f"{self.data.source}: {err} (not an ALBERT pretraining instance)") from None
        start = 0
        for recs, position in batches:
            part = {k: v[start : start + len(recs)] for k, v in arrays.items()}
            start += len(recs)
            yield to_torch(part), position

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        if info is None:
            return self.batches()
        return self._in_worker(info.id, info.num_workers)

    def _in_worker(self, worker: int, num_workers: int):
        """The batches of a loader worker process, as numpy arrays (make_loader's loader turns them
        back into the same tensors). A tensor would travel as a file descriptor of shared memory,
        which multiprocessing hands over through a Unix socket it binds under TMPDIR: with a TMPDIR
        path longer than a socket path may be (108 bytes) the bind fails, the queue's feeder thread
        drops the batch after printing the error, and the training process waited for it forever
        (`OSError: AF_UNIX path too long`, found in a demo on GCS whose tests set a long TMPDIR).
        Arrays travel by value through the pipe. A UserError (a damaged file) travels as an item:
        the DataLoader would re-raise it in the training process wrapped in the worker's traceback
        text; make_loader's loader raises it there as itself, one line."""
        try:
            for batch, position in self.batches(worker, num_workers):
                yield {k: v.numpy() for k, v in batch.items()}, position
        except UserError as err:
            yield err


# Seconds the training process waits for one batch from its loader workers before it gives up. A batch
# is a few reads (a request to a bucket gives up within about 3.5 minutes: core/storage/policy.py), so
# a worker silent this long is stuck: a run on the GCS emulator once waited 46 minutes, the training
# process on its next batch and the worker on its next request, both idle. Failing lets the flow's
# retry resume the run from its last checkpoint, where waiting would hold the stage forever.
LOADER_TIMEOUT_S = 600.0


class _Loader(torch.utils.data.DataLoader):
    """A DataLoader that raises the UserError a worker passed on (see InstanceStream._in_worker), and a
    worker that produced no batch for LOADER_TIMEOUT_S as StorageFailed: one line, exit 1."""

    def __iter__(self):
        batches = super().__iter__()
        if self.num_workers > 0:
            _WITH_WORKERS.add(batches)
        while True:
            try:
                item = next(batches)
            except StopIteration:
                return
            except RuntimeError as err:
                if not str(err).startswith("DataLoader timed out"):
                    raise
                # A stuck worker ignores SIGTERM (_ignore_stop_signals), and the exit would wait on it
                # (multiprocessing joins its children): shut the workers down as the iterator does
                # (which also unregisters them from torch's SIGCHLD check), then kill what is left.
                batches._shutdown_workers()
                for worker in batches._workers:
                    if worker.is_alive():
                        worker.kill()
                data = self.dataset.data
                raise StorageFailed(
                    "reading",
                    data.source or os.path.dirname(data.files[0]),  # the instances folder
                    f"no batch came from the loader's worker process in {self.timeout:g} s",
                    "rerun the same command: it resumes from its last checkpoint",
                ) from None
            if isinstance(item, UserError):
                raise item
            if self.num_workers > 0:  # a worker's numpy arrays (InstanceStream._in_worker)
                batch, position = item
                item = {k: _tensor(v, self.pin_memory) for k, v in batch.items()}, position
            yield item


def _as_is(item):
    return item


def _tensor(array: np.ndarray, pin: bool) -> torch.Tensor:
    tensor = torch.from_numpy(array)
    return tensor.pin_memory() if pin else tensor


# The loaders' iterators that have worker processes, until they are collected. Workers ignore SIGTERM
# (_ignore_stop_signals), and multiprocessing's own exit hook stops daemonic children with SIGTERM
# and then joins them without a timeout: an iterator still alive when the interpreter exits (held by
# a reference cycle, as a run on gs:// showed) would hang the exit for as long as its workers live.
_WITH_WORKERS: weakref.WeakSet = weakref.WeakSet()


@atexit.register  # registered after multiprocessing's hook, so it runs before it
def _stop_workers_at_exit() -> None:
    for batches in list(_WITH_WORKERS):
        batches._shutdown_workers()  # what the iterator's own __del__ calls: tells the workers to end


def _ignore_stop_signals(worker_id: int) -> None:
    """worker_init_fn: a loader worker ignores SIGTERM and SIGINT. They reach the whole process group
    (Prefect's cancel, `kill -TERM -PGID`, Ctrl-C at a terminal); a worker that died of them would break
    the step in flight, which the training process finishes and saves before it stops (model/trainer.py).
    A worker still ends with the training process: the DataLoader shuts it down, or it sees its parent
    gone."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def make_loader(stream: InstanceStream, num_workers: int = 0, pin_memory: bool = False, prefetch: int = 4):
    """A DataLoader over a stream of ready batches (each worker a separate process)."""
    kwargs = {}
    if num_workers > 0:
        kwargs = dict(
            prefetch_factor=prefetch,
            persistent_workers=False,
            multiprocessing_context="fork",
            timeout=LOADER_TIMEOUT_S,
            collate_fn=_as_is,  # not default_convert: it would make the worker's arrays tensors again  # read when the loader is made (tests lower it)
            worker_init_fn=_ignore_stop_signals,
        )
    # Its own generator: creating the loader's iterator must not draw from the global torch RNG
    # (that would shift dropout masks of a resumed run against an uninterrupted one).
    return _Loader(
        stream,
        batch_size=None,
        num_workers=num_workers,
        pin_memory=pin_memory,
        generator=torch.Generator().manual_seed(0),
        **kwargs,
    )

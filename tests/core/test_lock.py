"""core.lock: one writer per folder. Local folders with real processes and real flocks
(a kill -9'd holder, a forked child that outlives it); bucket locks against the strict fake GCS client
(tests/fake_gcs.py: it enforces the generation preconditions that the emulator ignores)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from core import lock
from tests.lock_holder import hold, kill9

# ------------------------------------------------------------------------------------ local folders


def test_a_second_process_is_refused_naming_the_holder_and_a_killed_holder_is_taken_over(tmp_path, capsys):
    folder = str(tmp_path / "out")
    proc = hold(folder)
    try:
        with pytest.raises(lock.Busy) as busy:
            lock.take(folder, "corpus")
        assert busy.value.holder.pid == proc.pid and busy.value.holder.host == lock.HOST
        assert f"in use by another `albert corpus` (host {lock.HOST}, pid {proc.pid}, since " in str(
            busy.value
        )
    finally:
        kill9(proc)  # kill -9: no clean-up ran, the lock file still names it
    assert lock.Holder.parse(open(os.path.join(folder, lock.NAME), "rb").read()).pid == proc.pid
    held = lock.take(folder, "corpus")  # at once: the kernel released the flock of the dead process
    assert held.previous.pid == proc.pid and held.reason == "no longer running"
    assert (
        f"taking over the lock of pid {proc.pid} on {lock.HOST} (no longer running)"
        in capsys.readouterr().err
    )
    assert lock.Holder.parse(open(os.path.join(folder, lock.NAME), "rb").read()).pid == os.getpid()
    held.release()
    assert os.listdir(folder) == []  # a released lock leaves no file


def test_a_forked_child_of_a_killed_holder_does_not_keep_its_lock(tmp_path):
    folder = str(tmp_path / "out")
    proc = hold(folder, fork=True)
    kill9(proc)  # its child sleeps on, with a copy of every descriptor of the parent but the lock's
    try:
        held = lock.take(folder, "corpus")
        assert held.previous.pid == proc.pid
        held.release()
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the child, in the holder's session


def test_a_scope_releases_its_locks_and_the_folders_they_created(tmp_path):
    folder = str(tmp_path / "a" / "b")
    with pytest.raises(RuntimeError), lock.scope():
        lock.take(folder, "vocab")
        assert os.path.exists(os.path.join(folder, lock.NAME))
        raise RuntimeError("the stage failed")
    assert not os.path.exists(tmp_path / "a")  # nothing left of a refused or failed run's lock
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "notes.txt").write_text("mine")
    with lock.scope():
        lock.take(str(tmp_path / "kept"), "vocab")
    assert os.listdir(tmp_path / "kept") == ["notes.txt"]


def test_a_lock_held_by_an_enclosing_scope_is_borrowed_in_its_thread_and_busy_in_another(tmp_path):
    folder = str(tmp_path / "registry" / "albert")
    seen = []
    with lock.scope():
        outer = lock.take(folder, "promote")
        with lock.scope():  # e.g. the promote flow, run in-process by `albert promote`
            inner = lock.take(folder, "promote")
            assert inner is not outer
        assert os.path.exists(os.path.join(folder, lock.NAME))  # the inner scope did not release it

        def other():  # a new thread: no enclosing scope (a retried task, another flow run)
            try:
                lock.take(folder, "promote")
            except lock.Busy as busy:
                seen.append(busy.holder.pid)

        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert seen == [os.getpid()]
    assert not os.path.exists(os.path.join(folder, lock.NAME))


# ------------------------------------------------------------------------------ buckets (strict fake)

URL = "gs://b/runs/x"
NAME = "runs/x/" + lock.NAME


def objects(client) -> dict:
    return client.buckets["b"].objects


def put_holder(client, **fields) -> None:
    holder = lock.Holder(**{"host": "other-host", "pid": 4242, "stage": "pretrain", "since": "2026-01-01T00:00:00Z",
                            "renewed": time.time(), "lease_s": 120.0, **fields})  # fmt: skip
    client.bucket("b").blob(NAME).upload_from_string(holder.dumps())


def test_a_bucket_lock_is_created_only_where_none_exists_and_deleted_only_if_still_ours(fake_gcs):
    held = lock.take(URL, "pretrain", client=fake_gcs)
    calls = fake_gcs.buckets["b"].calls
    assert ("upload", NAME, 0) in calls  # "must not exist"
    generation = objects(fake_gcs)[NAME][1]
    with pytest.raises(lock.Busy) as busy:  # this process is alive: its lock is live
        lock.take(URL, "pretrain", client=fake_gcs)
    assert busy.value.holder.pid == os.getpid()
    assert held.renew()  # the lease: a rewrite under the generation written last
    assert calls[-1] == ("upload", NAME, generation)
    renewed = objects(fake_gcs)[NAME][1]
    held.release()
    assert calls[-1] == ("delete", NAME, renewed) and NAME not in objects(fake_gcs)


def test_of_racing_takers_of_a_bucket_lock_exactly_one_wins(fake_gcs):
    n, barrier, results = 8, threading.Barrier(8), []

    def race():
        barrier.wait()
        try:
            results.append(lock.take(URL, "pretrain", client=fake_gcs))
        except lock.Busy:
            results.append(None)

    threads = [threading.Thread(target=race) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(r is not None for r in results) == 1


def test_a_bucket_lock_of_another_host_is_busy_while_its_lease_runs_and_taken_over_after(fake_gcs, capsys):
    put_holder(fake_gcs)
    with pytest.raises(lock.Busy) as busy:
        lock.take(URL, "pretrain", client=fake_gcs)
    assert "(host other-host, pid 4242, since 2026-01-01T00:00:00Z)" in str(busy.value)
    put_holder(fake_gcs, renewed=time.time() - 1000)
    held = lock.take(URL, "pretrain", client=fake_gcs)
    assert held.previous.host == "other-host" and "lease of 120 s ran out" in held.reason
    assert (
        "taking over the lock of pid 4242 on other-host (its lease of 120 s ran out"
        in capsys.readouterr().err
    )
    held.release()


def test_a_bucket_lock_of_a_dead_process_of_this_host_is_taken_over_at_once(fake_gcs):
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    put_holder(fake_gcs, host=lock.HOST, pid=int(done.stdout))  # its lease has not run out
    held = lock.take(URL, "pretrain", client=fake_gcs)
    assert held.reason == "no longer running"
    held.release()


def test_a_holder_that_lost_its_bucket_lock_says_so_and_never_deletes_the_new_holders(fake_gcs, capsys):
    held = lock.take(URL, "pretrain", client=fake_gcs)
    put_holder(fake_gcs)  # another host took it over (this one had stopped renewing)
    assert not held.renew() and held.lost
    assert "lost its lock to pid 4242 on other-host" in capsys.readouterr().err
    held.release()
    assert lock.Holder.parse(objects(fake_gcs)[NAME][0]).host == "other-host"

"""@limits_concurrency under real workers: limits hold, slots survive crashes."""

import os
import signal
import threading
import time

import pytest
from django.db import connections

from steady_queue.compat import TaskResultStatus
from steady_queue.models import (
    BlockedExecution,
    ClaimedExecution,
    FailedExecution,
    Job,
    Process,
    Semaphore,
)

from .. import tasks
from ..helpers import scaled, wait_for
from .support import (
    failures_of,
    intervals,
    most_at_once,
    runs_started,
    statuses,
    wait_for_boot,
    wait_for_exit,
    wait_until_settled,
)

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def enqueue_in_threads(calls, threads=3):
    """Enqueue (task, args) calls from several threads at once; return results."""
    results = []
    lock = threading.Lock()

    def enqueue(share):
        try:
            for task, args in share:
                result = task.enqueue(*args)
                with lock:
                    results.append(result)
        finally:
            connections.close_all()

    workers = [
        threading.Thread(target=enqueue, args=(calls[index::threads],))
        for index in range(threads)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return results


def test_no_key_ever_runs_more_than_its_limit(start_supervisor, tmp_path):
    path = str(tmp_path / "runs")
    # A slot that outlives the test: one_at_a_time's lasts 5 s from when it
    # is taken, and a loaded lane's run can wait longer than that between its
    # claim and its end; the expired slot then lets the next run of its key
    # go (as documented), and two runs of one key overlap.
    calls = [
        (tasks.one_at_a_time_until_released, (path, f"one-{index % 4}", 0.01))
        for index in range(200)
    ] + [
        # Long enough that runs of a key meet even on a loaded machine (at
        # 0.02 s, claims there were too slow for any two to overlap).
        (tasks.three_at_a_time, (path, f"three-{index % 3}", 0.2))
        for index in range(150)
    ]
    # Liveness is not what this tests: at load 15 a worker's heartbeat on
    # SQLite once lagged past the 5 s threshold, its supervisor killed it, and
    # two of its jobs failed with ProcessExitError. The threshold stretches
    # with SQ_TEST_TIME_SCALE; any other failure still fails the count.
    supervisor = start_supervisor(
        env={
            "SQ_TEST_WORKER_PROCESSES": "3",
            "SQ_TEST_THREADS": "4",
            "SQ_TEST_ALIVE_THRESHOLD": str(scaled(5)),
        }
    )
    wait_for_boot(supervisor, workers=3)
    # Enqueued while the workers claim and release: concurrent enqueue, claim
    # and release on the same semaphores.
    results = enqueue_in_threads(calls)
    assert len(results) == len(calls)

    wait_until_settled(len(calls), timeout=180)

    # A failure names each failed job's error: load (a pruned worker) and a
    # bug in the limits look alike in a count.
    assert statuses(results) == {TaskResultStatus.SUCCESSFUL: len(calls)}, failures_of(
        results
    )
    spans = intervals(path)
    assert {key: len(found) for key, found in spans.items()} == {
        **{f"one-{index}": 50 for index in range(4)},
        **{f"three-{index}": 50 for index in range(3)},
    }
    peaks = {key: most_at_once(found) for key, found in spans.items()}
    print(f"most runs at once per key: {peaks}")
    assert all(peaks[f"one-{index}"] == 1 for index in range(4)), peaks
    assert all(peaks[f"three-{index}"] <= 3 for index in range(3)), peaks
    # With 12 threads and 50 runs per key, a limit of 3 is actually reached.
    assert max(peaks[f"three-{index}"] for index in range(3)) > 1, peaks
    assert BlockedExecution.objects.count() == 0
    # Every slot given back. A semaphore may be gone altogether: once free and
    # past its duration (the default 3 minutes for three_at_a_time),
    # maintenance deletes it.
    expected = {
        **{
            f"tests.tasks.one_at_a_time_until_released/one-{i}": (1, 1)
            for i in range(4)
        },
        **{f"tests.tasks.three_at_a_time/three-{i}": (3, 3) for i in range(3)},
    }
    left = {s.key: (s.value, s.limit) for s in Semaphore.objects.all()}
    assert left == {key: expected[key] for key in left}
    supervisor.signal(signal.SIGTERM)
    assert wait_for_exit(supervisor) == 0


def test_a_killed_holders_slot_goes_to_the_next_blocked_job(start_supervisor, tmp_path):
    path = str(tmp_path / "runs")
    limited = tasks.one_at_a_time_until_released
    holder = limited.enqueue(path, "held", 60)
    waiting = [limited.enqueue(path, "held", 0) for _ in range(3)]
    assert BlockedExecution.objects.count() == 3
    supervisor = start_supervisor()
    wait_for_boot(supervisor)
    # Its run begun: a claim killed before that would go back to ready.
    wait_for(lambda: runs_started(path, "held") == 1, message="the long job started")
    claim = ClaimedExecution.objects.get(job_id=holder.id)
    worker = Process.objects.get(pk=claim.process_id)

    killed_at = time.monotonic()
    os.kill(worker.pid, signal.SIGKILL)
    wait_until_settled(4, timeout=30)
    settled_in = time.monotonic() - killed_at

    assert statuses(waiting) == {TaskResultStatus.SUCCESSFUL: 3}
    # Its run had begun: failed with its worker.
    assert FailedExecution.objects.filter(job_id=holder.id).exists()
    assert most_at_once(intervals(path)["held"]) == 1
    # Long before the slot's expiry (600 s): the failed claim gave it back.
    assert settled_in < scaled(20), settled_in
    supervisor.signal(signal.SIGTERM)
    assert wait_for_exit(supervisor) == 0


def test_maintenance_frees_a_slot_whose_holder_vanished(start_supervisor, tmp_path):
    path = str(tmp_path / "runs")
    lost = tasks.one_at_a_time.enqueue(path, "lost", 0)
    waiting = tasks.one_at_a_time.enqueue(path, "lost", 0)
    # The holder disappears without giving its slot back (as if its row were
    # deleted by hand): only the semaphore's expiry can free the slot.
    Job.objects.filter(pk=lost.id).delete()
    expires_at = Semaphore.objects.get().expires_at
    supervisor = start_supervisor()
    wait_for_boot(supervisor)

    wait_for(
        lambda: Job.objects.finished().filter(pk=waiting.id).exists(),
        timeout=15,
        message="the blocked job ran",
    )

    # The slot was taken at enqueue for 5 s: the waiting job ran only once it
    # expired, and soon after (maintenance runs every 1 s). Both times are the
    # rows' own, so a slow boot on a loaded machine does not count against it.
    late = (Job.objects.get(pk=waiting.id).finished_at - expires_at).total_seconds()
    assert 0 <= late < scaled(1 + 2), late
    supervisor.signal(signal.SIGTERM)
    assert wait_for_exit(supervisor) == 0


def test_a_forced_run_leaves_the_runs_after_it_within_the_limit(
    start_supervisor, tmp_path
):
    path = str(tmp_path / "runs")
    supervisor = start_supervisor()
    wait_for_boot(supervisor)
    # A slot that never expires during the test: only runs give slots back.
    limited = tasks.one_at_a_time_until_released
    # The holder runs until the forced run has surely begun beside it: at
    # load 15 its claim once came 2.3 s after the "run now" (the holder's
    # 2 s had ended), so its run stretches with SQ_TEST_TIME_SCALE.
    held = scaled(2)
    holder = limited.enqueue(path, "forced", held)
    wait_for(
        lambda: ClaimedExecution.objects.filter(job_id=holder.id).exists(),
        message="the holder claimed",
    )
    forced = limited.enqueue(path, "forced", held)
    later = [limited.enqueue(path, "forced", 0.5) for _ in range(5)]
    assert BlockedExecution.objects.count() == 6

    # The admin's "run now" on a blocked job: forced past the limit of 1.
    BlockedExecution.objects.filter(job_id=forced.id).make_ready_now()
    wait_until_settled(7, timeout=60)

    assert statuses([holder, forced, *later]) == {TaskResultStatus.SUCCESSFUL: 7}
    spans = intervals(path)["forced"]
    assert len(spans) == 7
    # The holder and the forced run overlapped (what the operator asked for)...
    assert most_at_once(spans[:2]) == 2, spans
    # ...and the runs after both never did: each slot given back was taken.
    assert most_at_once(spans[2:]) == 1, spans
    assert min(start for start, _ in spans[2:]) >= max(end for _, end in spans[:2])
    # The slot is free again.
    left = {s.key: (s.value, s.limit) for s in Semaphore.objects.all()}
    assert left == {"tests.tasks.one_at_a_time_until_released/forced": (1, 1)}
    supervisor.signal(signal.SIGTERM)
    assert wait_for_exit(supervisor) == 0

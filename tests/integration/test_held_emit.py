"""An emit whose transaction stays open past the alive threshold, beside a
forked supervisor: its workers go on finishing other jobs, none is killed,
and the job waiting for the event receives it once the emit commits."""

import threading

import pytest
from django.db import connection, transaction

from steady_queue import emit_event
from steady_queue.compat import TaskResultStatus
from steady_queue.models import Job

from .. import tasks, workflow_tasks
from ..helpers import scaled, wait_for
from .support import rows, sleep_briefly, status_of, wait_for_boot

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

# Beyond tests/settings.py's process_alive_threshold (5 s).
HELD_SECONDS = 8
JOBS = 30


def test_an_emit_held_open_stalls_no_worker(start_supervisor):
    if connection.vendor == "sqlite":
        pytest.skip("SQLite has one writer: an open emit holds every write (docs)")
    emitted, release, committed = (threading.Event() for _ in range(3))

    def hold():
        try:
            with transaction.atomic():
                emit_event("held-open", {"paid": True})
                emitted.set()
                release.wait(scaled(60))
            committed.set()
        finally:
            connection.close()

    threading.Thread(target=hold, daemon=True).start()
    assert emitted.wait(scaled(10))
    supervisor = start_supervisor(
        env={"SQ_TEST_WORKER_PROCESSES": "1", "SQ_TEST_THREADS": "3"}
    )
    try:
        [worker] = wait_for_boot(supervisor, workers=1)
        waiter = workflow_tasks.waits_for.enqueue("held-open")
        others = [tasks.add.enqueue(n, 1) for n in range(JOBS)]
        wait_for(
            lambda: all(status_of(r) == TaskResultStatus.SUCCESSFUL for r in others),
            timeout=30,
            message="the other jobs finished while the emit was held open",
        )
        # Held past the alive threshold (a duration, not a condition): the
        # worker goes on heartbeating and running the waiter again each
        # second, and is never replaced.
        sleep_briefly(HELD_SECONDS)
        assert not committed.is_set()
        assert [w.pid for w in rows("worker")] == [worker.pid]
        # Not finished, nor failed: ready again, or running again.
        assert status_of(waiter) in (TaskResultStatus.READY, TaskResultStatus.RUNNING)
    finally:
        release.set()
    assert wait_for(committed.is_set, message="the emit committed")

    wait_for(
        lambda: status_of(waiter) == TaskResultStatus.SUCCESSFUL,
        timeout=30,
        message="the waiter received the event",
    )
    waiter.refresh()
    assert waiter.return_value == {"before": "b", "payload": {"paid": True}}
    assert Job.objects.get(pk=waiter.id).errors == []

"""A serialization failure (SQLSTATE 40001) while a worker records outcomes
is a conflict to try again, never the outcome's fault: the run's real outcome
is stored at the next poll, never OutcomeNotStoredError in its place."""

import threading
import time

import pytest
from django.db import OperationalError, connection, connections, transaction

from steady_queue.compat import TaskResultStatus
from steady_queue.dialects import is_lock_conflict
from steady_queue.models import ClaimedExecution, Job, Process

from .. import tasks
from ..factories import finished_by
from ..helpers import wait_for

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="PostgreSQL's SQLSTATE 40001"
    ),
]


def backend_pid():
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def waits_for_a_lock(pid):
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid]
        )
        row = cursor.fetchone()
    return row is not None and row[0] == "Lock"


def change_under(job_id, pid, times, held, locked):
    """Update the job's row ``times`` times, each committed once the
    connection ``pid`` waits for its lock (a transaction whose snapshot
    predates the change then fails with 40001); give up on a round that
    nobody waits for within a few seconds."""
    try:
        for _ in range(times):
            with transaction.atomic():
                Job.objects.filter(pk=job_id).update(priority=3)
                locked.set()
                try:
                    wait_for(lambda: waits_for_a_lock(pid), timeout=3, interval=0.02)
                except AssertionError:
                    transaction.set_rollback(True)
                    return
            held.append(time.monotonic())
    finally:
        connections.close_all()


def test_a_serialization_failure_while_recording_keeps_the_real_outcome(backend):
    from steady_queue.processes.worker import Worker

    worker = Worker(backend, backend.config.workers[0], name="worker-40001")
    worker.process = Process.objects.register(kind="worker", name=worker.name)
    result = tasks.add.enqueue(2, 2)
    finished_by(worker, [result], [4])
    job_id = int(result.id)
    # This connection's transactions (and statements outside them) read
    # from snapshots, as at a server default of REPEATABLE READ: another
    # transaction's change to the job's row fails them with 40001.
    with connection.cursor() as cursor:
        cursor.execute(
            "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL REPEATABLE READ"
        )
    held, locked = [], threading.Event()
    other = threading.Thread(
        target=change_under, args=(job_id, backend_pid(), 2, held, locked)
    )
    other.start()
    assert locked.wait(timeout=10)
    try:
        with pytest.raises(OperationalError) as raised:
            worker.record_outcomes()
    finally:
        other.join(timeout=30)
    assert is_lock_conflict(raised.value)
    # Nothing stored in its place: the outcome waits for the next poll.
    assert [outcome.job.pk for outcome in worker.recorder.pending] == [job_id]
    assert ClaimedExecution.objects.filter(job_id=job_id).exists()

    connection.close()  # the guard's reconnect, at READ COMMITTED again
    worker.record_outcomes()

    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == 4
    assert not worker.recorder.pending
    assert not ClaimedExecution.objects.exists()

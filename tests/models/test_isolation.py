"""Limits at REPEATABLE READ and SERIALIZABLE: our own transactions run at
READ COMMITTED, and an enqueue inside a caller's transaction whose snapshot
is too old never lets a job past its limit (on PostgreSQL it fails as a
serialization failure; MySQL's locking reads see past the snapshot)."""

import threading
import uuid

import pytest
from django.db import OperationalError, connection, connections, transaction

from steady_queue.dialects import is_lock_conflict, refuses_the_row
from steady_queue.dialects.isolation import StaleSnapshot, atomic
from steady_queue.models import (
    BlockedExecution,
    Job,
    Pause,
    RateStart,
    ReadyExecution,
    Semaphore,
)

from .. import tasks
from ..factories import registered_process
from ..helpers import at_isolation_level

pytestmark = pytest.mark.django_db(transaction=True)

LEVELS = ["repeatable read", "serializable"]


@pytest.fixture(params=LEVELS)
def level(request):
    if connection.vendor == "sqlite":
        pytest.skip("SQLite has no isolation levels to choose")
    with at_isolation_level(request.param):
        yield request.param


def sees_what_commits_meanwhile():
    """Whether the open transaction reads a row that another transaction
    commits after its first read (READ COMMITTED does; a snapshot not)."""
    before = Pause.objects.count()

    def insert():
        if connection.vendor == "mysql":
            # A snapshot level's locking reads would hold the insert up.
            with connection.cursor() as cursor:
                cursor.execute("SET SESSION innodb_lock_wait_timeout = 1")
        Pause.objects.create(queue_name=f"meanwhile-{uuid.uuid4().hex}")

    in_another_thread(insert)
    return Pause.objects.count() > before


def at_once(count, function):
    """Run function(index) in ``count`` threads released together; return
    the errors they raised."""
    barrier = threading.Barrier(count)
    errors = []

    def run(index):
        try:
            barrier.wait(timeout=10)
            function(index)
        except Exception as error:
            errors.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return errors


def in_another_thread(function):
    errors = at_once(1, lambda _: function())
    assert not errors, errors


def test_our_transactions_run_at_read_committed_and_the_callers_keep_theirs(level):
    with atomic(using="default"):
        assert sees_what_commits_meanwhile()
    if connection.vendor == "mysql" and level == "serializable":
        return  # a caller's read locks the gaps there: no insert gets in
    with transaction.atomic():
        assert not sees_what_commits_meanwhile()
        with atomic(using="default"):  # a savepoint in the caller's
            assert not sees_what_commits_meanwhile()
    with atomic(using="default"):
        assert sees_what_commits_meanwhile()


def test_concurrent_enqueues_keep_a_rate(level, tmp_path):
    path = str(tmp_path / "runs")

    errors = at_once(12, lambda _: tasks.three_a_minute.enqueue(path, "api"))

    assert not errors, errors
    assert Job.objects.count() == 12
    assert RateStart.objects.count() == 3
    assert ReadyExecution.objects.count() == 3
    assert BlockedExecution.objects.count() == 9


def test_concurrent_enqueues_keep_one_slot(level, tmp_path):
    path = str(tmp_path / "runs")

    errors = at_once(8, lambda _: tasks.one_at_a_time.enqueue(path, "k", 0))

    assert not errors, errors
    assert ReadyExecution.objects.count() == 1
    assert BlockedExecution.objects.count() == 7
    assert Semaphore.objects.get().value == 0


def test_an_enqueue_in_an_older_snapshot_never_passes_a_rate(level, tmp_path):
    path = str(tmp_path / "runs")
    tasks.three_a_minute.enqueue(path, "api")
    tasks.three_a_minute.enqueue(path, "api")

    def enqueue_in_an_older_snapshot(meanwhile=True):
        with transaction.atomic():
            Pause.objects.count()  # the caller's snapshot is taken
            if meanwhile:
                in_another_thread(lambda: tasks.three_a_minute.enqueue(path, "api"))
            tasks.three_a_minute.enqueue(path, "api")

    if connection.vendor == "postgresql":
        with pytest.raises(OperationalError) as raised:
            enqueue_in_an_older_snapshot()
        # A conflict to retry, as any other serialization failure.
        assert is_lock_conflict(raised.value)
        assert ReadyExecution.objects.count() == 3
        # Run again, it sees the window full.
        enqueue_in_an_older_snapshot(meanwhile=False)
    else:
        # MySQL: the window's count is a locking read, past the snapshot.
        enqueue_in_an_older_snapshot()
    assert RateStart.objects.count() == 3
    assert ReadyExecution.objects.count() == 3
    assert BlockedExecution.objects.count() == Job.objects.count() - 3


def test_an_enqueue_in_an_older_snapshot_never_passes_a_slot(level, tmp_path):
    path = str(tmp_path / "runs")

    def enqueue_in_an_older_snapshot():
        with transaction.atomic():
            Pause.objects.count()  # the caller's snapshot is taken
            # Another enqueue creates the key's semaphore and takes its slot.
            in_another_thread(lambda: tasks.one_at_a_time.enqueue(path, "k", 0))
            tasks.one_at_a_time.enqueue(path, "k", 0)

    if connection.vendor == "postgresql":
        with pytest.raises(OperationalError) as raised:
            enqueue_in_an_older_snapshot()
        assert is_lock_conflict(raised.value)
        if level == "repeatable read":
            # The key's row, created since the snapshot, cannot be seen in it.
            assert isinstance(raised.value, StaleSnapshot)
            assert "DATABASES['default']['OPTIONS']['isolation_level']" in str(
                raised.value
            )
    else:
        # MySQL: the semaphore is read with its lock, past the snapshot.
        enqueue_in_an_older_snapshot()
        assert BlockedExecution.objects.count() == 1
    assert ReadyExecution.objects.count() == 1
    assert Semaphore.objects.get().value == 0


def test_a_serialization_failure_is_never_the_rows_fault(level):
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's SQLSTATE 40001")
    job = tasks.noop.enqueue()

    def change_it():
        Job.objects.filter(pk=job.id).update(priority=5)

    with pytest.raises(OperationalError) as raised, transaction.atomic():
        Job.objects.get(pk=job.id)  # the snapshot is taken
        in_another_thread(change_it)
        Job.objects.filter(pk=job.id).update(priority=7)

    assert is_lock_conflict(raised.value)
    assert not refuses_the_row(raised.value, connection)


def test_an_enqueue_in_an_older_snapshot_never_merges_into_a_started_run(level):
    from steady_queue.processes.queue_selector import QueueSelector

    first = tasks.refresh_listing.enqueue(1)

    def claim_it():
        selector = QueueSelector(["*"], "default", pause_refresh=0)
        ReadyExecution.objects.claim(selector, 10, registered_process(1))

    def enqueue_in_an_older_snapshot(meanwhile=True):
        with transaction.atomic():
            Pause.objects.count()  # the caller's snapshot is taken
            if meanwhile:
                in_another_thread(claim_it)  # the pending run starts
            return tasks.refresh_listing.enqueue(1)

    if connection.vendor == "postgresql":
        # The run's ready row, gone since the snapshot, fails its locking read.
        with pytest.raises(OperationalError) as raised:
            enqueue_in_an_older_snapshot()
        assert is_lock_conflict(raised.value)
        second = enqueue_in_an_older_snapshot(meanwhile=False)
    else:
        # MySQL: the locking read sees it gone.
        second = enqueue_in_an_older_snapshot()
    # A new job, not merged into the one that started before it.
    assert second.id != first.id
    assert ReadyExecution.objects.filter(job_id=second.id).exists()

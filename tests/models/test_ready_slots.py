"""The ready table's slots on PostgreSQL (models/ready_slots.py): a rotation
empties the next slot (written two periods ago), moves out what is still
ready there, never waits on a claim or an enqueue in flight, and keeps a held
snapshot's dead index entries out of the claim's path."""

import logging
import time
from contextlib import contextmanager

import psycopg
import pytest
from django.db import connection, transaction

from steady_queue import enqueue_many
from steady_queue.backend import SteadyQueueBackend
from steady_queue.conf.options import DispatcherConfig
from steady_queue.models import ReadyExecution
from steady_queue.models.ready_slots import SLOTS
from steady_queue.processes.dispatcher import Dispatcher
from steady_queue.processes.queue_selector import QueueSelector

from .. import tasks
from ..factories import jobs_of, registered_process
from ..helpers import scaled
from ..lock_waits import OtherSession

TABLE = ReadyExecution._meta.db_table
CURRENT, TARGET = 0, 1  # rotate(current=0) empties slot 1


@pytest.fixture(autouse=True)
def postgresql_only(request):
    if connection.vendor != "postgresql" and "elsewhere" not in request.node.name:
        pytest.skip("only PostgreSQL partitions the ready table")


@pytest.mark.django_db
def test_elsewhere_a_rotation_does_nothing():
    if connection.vendor == "postgresql":
        pytest.skip("PostgreSQL partitions the ready table")
    enqueued(2)
    assert ReadyExecution.objects.rotate_slots() is None
    assert ReadyExecution.objects.count() == 2


@contextmanager
def slot_default(slot):
    """Inserts go to ``slot`` meanwhile (the column's default, set to it and
    committed with the test's transaction, if any): no update leaves a dead
    row in another slot."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_get_expr(adbin, adrelid) FROM pg_attrdef JOIN pg_attribute"
            " ON attrelid = adrelid AND attnum = adnum"
            " WHERE adrelid = %s::regclass AND attname = 'slot'",
            [TABLE],
        )
        (default,) = cursor.fetchone()
        cursor.execute(f"ALTER TABLE {TABLE} ALTER COLUMN slot SET DEFAULT {slot}")
        try:
            yield
        finally:
            cursor.execute(
                f"ALTER TABLE {TABLE} ALTER COLUMN slot SET DEFAULT {default}"
            )


def enqueued(count):
    """``count`` ready jobs; their ids."""
    jobs = enqueue_many(tasks.noop, [((), {})] * count)
    return sorted(int(job.id) for job in jobs)


def enqueued_in_slot(slot, count):
    """``count`` ready jobs inserted in ``slot``; their ids."""
    with slot_default(slot):
        return enqueued(count)


def rows_by_slot():
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT slot, job_id FROM {TABLE} ORDER BY job_id")
        found = {}
        for slot, job_id in cursor.fetchall():
            found.setdefault(slot, []).append(job_id)
        return found


def slot_size(slot):
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT pg_relation_size('{TABLE}_slot{slot}')")
        return cursor.fetchone()[0]


def claim(count):
    selector = QueueSelector(["*"], "default", pause_refresh=0)
    return jobs_of(ReadyExecution.objects.claim(selector, count, registered_process(1)))


@pytest.mark.django_db
def test_a_rotation_moves_what_is_still_ready_and_empties_the_slot():
    ids = enqueued_in_slot(TARGET, 5)
    claimed = [job.pk for job in claim(2)]
    assert claimed == ids[:2]

    assert ReadyExecution.objects.rotate_slots(current=CURRENT) == 3

    assert rows_by_slot() == {CURRENT: ids[2:]}
    assert slot_size(TARGET) == 0
    # Still ready, in the same order.
    assert [job.pk for job in claim(5)] == ids[2:]


@pytest.mark.django_db
def test_an_empty_slot_is_left_alone():
    enqueued_in_slot(CURRENT, 2)
    ReadyExecution.objects.rotate_slots(current=CURRENT)
    assert slot_size(TARGET) == 0
    assert ReadyExecution.objects.rotate_slots(current=CURRENT) is None
    assert slot_size(TARGET) == 0


@pytest.mark.django_db
def test_a_backlog_is_not_moved(monkeypatch):
    from steady_queue.models import ready_slots

    monkeypatch.setattr(ready_slots, "MOVE_LIMIT", 3)
    ids = enqueued_in_slot(TARGET, 4)
    assert ReadyExecution.objects.rotate_slots(current=CURRENT) is None
    assert rows_by_slot() == {TARGET: ids}


def rotation_beside(hold):
    """Rotate in another session while ``hold()`` keeps this session's
    transaction open; what the rotation returned."""
    with transaction.atomic():
        hold()
        other = OtherSession(
            lambda: ReadyExecution.objects.rotate_slots(current=CURRENT)
        ).start()
        # The rotation gives up after LOCK_WAIT, and never waits longer.
        other.join(timeout=scaled(10))
    assert other.error is None, other.error
    return other.value


@pytest.mark.django_db(transaction=True)
def test_an_enqueue_not_yet_committed_to_the_slot_keeps_it_and_its_job():
    with slot_default(TARGET):
        assert rotation_beside(lambda: enqueued(3)) is None
    ids = sorted(rows_by_slot()[TARGET])
    assert len(ids) == 3
    # Once committed, the next rotation moves them.
    assert ReadyExecution.objects.rotate_slots(current=CURRENT) == 3
    assert rows_by_slot() == {CURRENT: ids}


@pytest.mark.django_db(transaction=True)
def test_a_claim_in_flight_in_the_slot_keeps_it():
    ids = enqueued_in_slot(TARGET, 3)

    def claim_in_a_transaction():
        # A claim between its pick and its commit: the rows locked, one deleted.
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT job_id FROM {TABLE} ORDER BY job_id FOR UPDATE SKIP LOCKED"
            )
            cursor.execute(f"DELETE FROM {TABLE} WHERE job_id = %s", [ids[0]])

    assert rotation_beside(claim_in_a_transaction) is None
    assert rows_by_slot() == {TARGET: ids[1:]}
    assert ReadyExecution.objects.rotate_slots(current=CURRENT) == 2
    assert rows_by_slot() == {CURRENT: ids[1:]}


def pick_buffers():
    """Shared buffers a claim's pick reads now (EXPLAIN ANALYZE, BUFFERS)."""
    selector = QueueSelector(["*"], "default", pause_refresh=0)
    ((sql, params),) = ReadyExecution.objects.pick_statements(selector, 10)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_bitmapscan = off")
        cursor.execute("SET LOCAL enable_sort = off")
        cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}", params)
        plan = cursor.fetchone()[0][0]["Plan"]
        transaction.set_rollback(True)
    return plan.get("Shared Hit Blocks", 0) + plan.get("Shared Read Blocks", 0)


@pytest.mark.django_db(transaction=True)
def test_a_held_snapshot_keeps_no_dead_entries_in_the_claims_path():
    settings = connection.settings_dict
    holder = psycopg.connect(
        host=settings["HOST"],
        port=settings["PORT"] or 5432,
        user=settings["USER"],
        password=settings["PASSWORD"] or None,
        dbname=settings["NAME"],
    )
    try:
        holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        holder.execute("SELECT count(*) FROM steady_queue_processes").fetchone()
        enqueued_in_slot(TARGET, 3000)
        while claim(100):
            pass
        # Deleted after the snapshot: vacuum may not remove them, and the
        # index keeps their entries in the pick's path.
        held = pick_buffers()
        assert held > 20, held
        assert ReadyExecution.objects.rotate_slots(current=CURRENT) == 0
        ids = enqueued_in_slot(CURRENT, 3)
        assert pick_buffers() <= 10
        assert [job.pk for job in claim(10)] == ids
    finally:
        holder.close()


def claimed_from_every_slot():
    """Jobs inserted in each slot and claimed: every slot holds dead rows."""
    for slot in range(SLOTS):
        enqueued_in_slot(slot, 2)
    while claim(10):
        pass
    assert all(slot_size(slot) > 0 for slot in range(SLOTS))


def a_dispatcher():
    return Dispatcher(
        SteadyQueueBackend("default", {"OPTIONS": {}}), DispatcherConfig()
    )


@pytest.mark.django_db
def test_the_dispatcher_empties_one_slot_a_rotation():
    claimed_from_every_slot()

    a_dispatcher().poll()

    assert sorted(slot_size(slot) == 0 for slot in range(SLOTS)) == [
        False,
        False,
        True,
    ]


@pytest.mark.django_db
def test_a_user_that_may_not_truncate_is_told_once_and_the_dispatcher_goes_on(
    caplog,
):
    claimed_from_every_slot()
    dispatcher = a_dispatcher()
    with connection.cursor() as cursor:
        # Undone with the test's transaction.
        role = f"sq_test_no_truncate_{connection.settings_dict['NAME']}"
        cursor.execute(f"CREATE ROLE {role}")
        cursor.execute(
            "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public"
            " TO " + role
        )
        cursor.execute(f"SET ROLE {role}")
        try:
            with caplog.at_level(logging.WARNING, logger="steady_queue"):
                dispatcher.poll()
                dispatcher.poll()
        finally:
            cursor.execute("RESET ROLE")
    grant = f"GRANT TRUNCATE ON {TABLE}_slot0"
    told = [
        record.getMessage() for record in caplog.records if grant in record.getMessage()
    ]
    assert len(told) == 1, caplog.records
    assert "may not empty" in told[0]
    assert "no restart needed" in told[0]
    # Tried again later: a grant made meanwhile takes effect.
    assert dispatcher.next_rotation_at > time.monotonic() + 60
    dispatcher.next_rotation_at = 0.0
    with caplog.at_level(logging.INFO, logger="steady_queue"):
        dispatcher.poll()
    assert "empties the ready table's slots again" in caplog.text
    assert sorted(slot_size(slot) == 0 for slot in range(SLOTS)) == [
        False,
        False,
        True,
    ]

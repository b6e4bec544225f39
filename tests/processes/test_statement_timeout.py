"""A statement timeout on the finish path is transient, like a lock conflict.

PostgreSQL's statement_timeout (57014) and MariaDB's max_statement_time (1969)
cut off a finish that waits for a lock: the outcome is recorded once the lock
is free, never replaced by an OutcomeNotStoredError failure.
"""

import threading

import pytest
from django.db import connection, transaction
from django.db.backends.signals import connection_created

from steady_queue.compat import TaskResultStatus
from steady_queue.dialects import dialect_for
from steady_queue.models import Job

from .. import tasks
from ..helpers import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

CUT_OFF_AFTER = {
    "postgresql": "SET statement_timeout = 200",
    "mysql": "SET SESSION max_statement_time = 0.2",
}


@pytest.fixture
def statement_timeout_on_other_threads():
    """Every connection opened by another thread (the worker's) has a 200 ms
    statement timeout, as a server configured for web requests might."""
    if connection.vendor not in CUT_OFF_AFTER or (
        connection.vendor == "mysql" and not connection.mysql_is_mariadb
    ):
        pytest.skip("a statement timeout of PostgreSQL's or MariaDB's")
    test_thread = threading.get_ident()

    def cut_off(sender, connection, **kwargs):
        if threading.get_ident() != test_thread:
            with connection.cursor() as cursor:
                cursor.execute(CUT_OFF_AFTER[connection.vendor])

    connection_created.connect(cut_off)
    yield
    connection_created.disconnect(cut_off)


def share_lock(result):
    # The dialect's clause serves claims where they take several statements,
    # which PostgreSQL's never do.
    if connection.vendor == "postgresql":
        lock = " FOR SHARE"
    else:
        lock = dialect_for(connection).share_lock_clause
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id FROM {Job._meta.db_table} WHERE id = %s{lock}", [result.id]
        )


def test_a_finish_cut_off_by_the_statement_timeout_is_recorded_later(
    run_supervisor, statement_timeout_on_other_threads, caplog
):
    caplog.set_level("WARNING", logger="steady_queue")
    result = tasks.add.enqueue(20, 22)
    with transaction.atomic():
        # The finish must update this row: it waits, and is cut off. A share
        # lock lets the claim through (its foreign key check shares it).
        share_lock(result)
        run_supervisor()
        wait_for(
            lambda: any(
                "statement timeout" in r.getMessage()
                or "max_statement_time" in r.getMessage()
                or "canceling statement" in r.getMessage()
                or "maximum statement execution time" in r.getMessage()
                for r in caplog.records
            ),
            timeout=30,
            message="the worker's finish was never cut off",
        )
    wait_for(lambda: result.refresh() or result.is_finished, timeout=30)
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == 42
    assert result.errors == []

"""Our hot-path statements on PostgreSQL run on cursors kept per connection
where nobody watches them, and on Django's cursors where someone does
(dialects/hot_cursors.py)."""

import asyncio
import functools

import pytest
from django.core.exceptions import SynchronousOnlyOperation
from django.db import (
    DatabaseError,
    IntegrityError,
    connection,
    connections,
    transaction,
)
from django.db.backends.utils import CursorWrapper
from django.test.utils import CaptureQueriesContext

from steady_queue.dialects import hot_cursors
from steady_queue.models import ClaimedExecution, Job

pytestmark = pytest.mark.django_db(transaction=True)

SELECT_SQL = "SELECT %s::int"


@pytest.fixture(autouse=True)
def on_postgresql():
    if connection.vendor != "postgresql":
        pytest.skip("kept cursors are PostgreSQL's (other dialects use Django's)")


def jobs():
    return Job.objects.using("default")


def psycopg_cursor_of(sql=SELECT_SQL, params=(1,)):
    """The psycopg cursor our statement ran on, and its rows."""
    with jobs().dialect.preparing_cursor(connections["default"]) as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
        return getattr(cursor, "cursor", None), rows


def test_a_statement_nobody_watches_runs_on_a_cursor_kept_for_the_next():
    first, rows = psycopg_cursor_of(params=(1,))
    second, again = psycopg_cursor_of(params=(2,))
    assert first is not None and second is first
    assert rows == [(1,)] and again == [(2,)]


def test_a_new_connection_gets_cursors_of_its_own():
    first, _ = psycopg_cursor_of()
    for _ in range(5):
        connection.close()
        second, rows = psycopg_cursor_of()
        assert second is not first and rows == [(1,)]
        assert not second.connection.closed
    # Those of the closed connections were let go with them.
    assert [hot.cursor for hot in hot_cursors.kept_by(connections["default"])] == [
        second
    ]


def test_statements_of_a_pipeline_each_get_a_cursor_of_their_own():
    statements = [(SELECT_SQL, [n]) for n in range(4)]
    assert list(jobs().run_prepared_in_turn(statements)) == [
        [(0,)],
        [(1,)],
        [(2,)],
        [(3,)],
    ]
    # Two in flight at once, and both kept afterwards.
    assert len(hot_cursors.kept_by(connections["default"])) == 2


def test_a_cursor_closed_twice_is_kept_once():
    cursor = jobs().dialect.preparing_cursor(connections["default"])
    cursor.close()
    cursor.close()
    assert hot_cursors.kept_by(connections["default"]).count(cursor) == 1


def test_the_drivers_errors_are_djangos():
    claimed = ClaimedExecution._meta.db_table
    with pytest.raises(IntegrityError):
        jobs().run_prepared(
            f"INSERT INTO {claimed} (job_id, process_id, created_at, started)"
            " VALUES (%s, NULL, now(), false) RETURNING job_id",
            [-1],
        )
    # The cursor goes on serving the connection.
    assert jobs().run_prepared(SELECT_SQL, [5]) == [(5,)]


def test_a_statement_in_a_broken_atomic_block_is_refused_as_djangos_are():
    with transaction.atomic():
        with pytest.raises(DatabaseError):
            with transaction.atomic():
                jobs().run_prepared("SELECT 1/0", [])
        # The savepoint rolled back: the block goes on.
        assert jobs().run_prepared(SELECT_SQL, [3]) == [(3,)]
    with pytest.raises(transaction.TransactionManagementError):
        with transaction.atomic():
            with pytest.raises(DatabaseError):
                with transaction.atomic(savepoint=False):
                    jobs().run_prepared("SELECT 1/0", [])
            jobs().run_prepared(SELECT_SQL, [3])


def test_captured_queries_see_our_statements():
    with CaptureQueriesContext(connection) as captured:
        jobs().run_prepared(SELECT_SQL, [7])
    assert len(captured.captured_queries) == 1


def test_an_execute_wrapper_sees_our_statements():
    seen = []

    def wrapper(execute, sql, params, many, context):
        seen.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(wrapper):
        assert jobs().run_prepared(SELECT_SQL, [8]) == [(8,)]
    assert seen == [SELECT_SQL]


def test_a_replaced_cursor_method_sees_our_statements():
    # As the debug toolbar wraps a connection's cursors.
    made = []
    cursor = connection.cursor

    def counting():
        made.append(True)
        return cursor()

    connection.cursor = counting
    try:
        assert jobs().run_prepared(SELECT_SQL, [9]) == [(9,)]
    finally:
        del connection.cursor
    assert made == [True]


@pytest.mark.parametrize("wraps", [False, True], ids=["plain", "wraps"])
def test_a_patched_cursor_wrapper_sees_our_statements(monkeypatch, wraps):
    # As an APM's instrumentation patches Django's cursor wrapper. Sentry's
    # (functools.wraps, set up in the settings before our modules load)
    # looks like Django's own by name: what counts is where the function
    # was written, not which one was found at import.
    seen = []
    execute = CursorWrapper.execute

    def instrumented(self, sql, params=None):
        seen.append(sql)
        return execute(self, sql, params)

    if wraps:
        instrumented = functools.wraps(execute)(instrumented)
    monkeypatch.setattr(CursorWrapper, "execute", instrumented)
    assert jobs().run_prepared(SELECT_SQL, [4]) == [(4,)]
    assert seen == [SELECT_SQL]


@pytest.mark.parametrize("method", ["make_cursor", "cursor", "create_cursor"])
def test_a_backend_that_makes_its_own_cursors_sees_our_statements(method):
    # As django-prometheus's backend, or a project's subclass, wraps every
    # cursor its connection makes.
    wrapper = connections["default"]
    djangos = type(wrapper)
    made = []

    def counting(self, *args, **kwargs):
        made.append(method)
        return getattr(djangos, method)(self, *args, **kwargs)

    backend = type("CountingWrapper", (djangos,), {method: counting})
    wrapper.__class__ = backend
    try:
        assert jobs().run_prepared(SELECT_SQL, [2]) == [(2,)]
    finally:
        wrapper.__class__ = djangos
    assert made


def test_an_event_loop_may_not_run_our_statements():
    async def in_a_coroutine():
        jobs().run_prepared(SELECT_SQL, [1])

    connection.ensure_connection()
    with pytest.raises(SynchronousOnlyOperation):
        asyncio.run(in_a_coroutine())

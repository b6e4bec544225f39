"""Enqueue's statements: as few as the database allows, and all of them seen by
Django's query capture (assertNumQueries, CaptureQueriesContext, the debug
toolbar), which on PostgreSQL once missed the prepared hot-path statements."""

import time
from types import SimpleNamespace

import pytest
from django.db import DataError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from steady_queue import enqueue_many
from steady_queue.dialects import dialect_for, prepared
from steady_queue.models import EnqueueRequest, Job, ReadyExecution

from .. import tasks
from ..helpers import scaled

pytestmark = pytest.mark.django_db

one_statement = pytest.mark.skipif(
    not dialect_for(connection).runs_hot_paths_in_one_statement,
    reason="enqueue is one statement only where the database has data-modifying CTEs",
)


def writes(captured, table):
    def unquoted(sql):
        return sql.replace('"', "").replace("`", "")

    return [query for query in captured if f"INTO {table}" in unquoted(query["sql"])]


@pytest.fixture
def compound_statements():
    # Asked of the connection: MySQL and MariaDB share their vendor.
    if not dialect_for(connection).runs_compound_statements(connection):
        pytest.skip("an enqueue is one compound statement only on MariaDB")


def test_query_capture_sees_the_statements_an_enqueue_runs():
    with CaptureQueriesContext(connection) as captured:
        result = tasks.add.enqueue(1, 2)

    if connection.vendor == "postgresql":
        # One call of the server-side function that writes both rows.
        calls = [q for q in captured if "steady_queue_enqueue(" in q["sql"]]
        assert calls, captured.captured_queries
    else:
        assert writes(captured, "steady_queue_jobs"), captured.captured_queries
        assert writes(captured, "steady_queue_ready_executions"), (
            captured.captured_queries
        )
    assert ReadyExecution.objects.filter(job_id=result.id).exists()


@one_statement
def test_an_enqueue_is_one_statement_on_postgresql(django_assert_num_queries):
    with django_assert_num_queries(1):
        tasks.add.enqueue(1, 2)


@one_statement
def test_a_bulk_enqueue_is_one_statement_per_batch(django_assert_num_queries):
    with django_assert_num_queries(1):
        results = enqueue_many(tasks.add, [((n, n), {}) for n in range(50)])

    assert Job.objects.filter(pk__in=[result.id for result in results]).count() == 50


@pytest.mark.django_db(transaction=True)
def test_an_enqueue_in_autocommit_is_one_statement_on_mariadb(
    compound_statements, django_assert_num_queries
):
    with django_assert_num_queries(1) as captured:
        result = tasks.add.enqueue(1, 2)

    assert writes(captured, "steady_queue_jobs")
    assert writes(captured, "steady_queue_ready_executions")
    assert ReadyExecution.objects.filter(job_id=result.id).exists()


@pytest.mark.django_db(transaction=True)
def test_an_enqueue_in_the_callers_transaction_joins_it_on_mariadb(
    compound_statements, django_assert_num_queries
):
    with transaction.atomic(), django_assert_num_queries(2):
        tasks.add.enqueue(1, 2)


def test_execute_wrappers_see_the_enqueue():
    seen = []

    def record(execute, sql, params, many, context):
        seen.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        tasks.add.enqueue(1, 2)

    # PostgreSQL calls the function that writes the rows (steady_queue_enqueue).
    assert any(
        "steady_queue_jobs" in sql or "steady_queue_enqueue(" in sql for sql in seen
    ), seen


def prepared_statements():
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s",
            # The enqueue function's call, or the bulk INSERT.
            ["%steady_queue_%"],
        )
        return cursor.fetchone()[0]


@one_statement
def test_the_enqueue_is_prepared_when_the_project_allows_prepared_statements():
    connection.ensure_connection()
    threshold = connection.connection.prepare_threshold
    connection.connection.prepare_threshold = 5  # OPTIONS["prepare_threshold"]
    try:
        tasks.add.enqueue(1, 2)
        tasks.add.enqueue(3, 4)
        assert prepared_statements() >= 1
    finally:
        connection.connection.prepare_threshold = threshold


@pytest.fixture
def prepared_choice():
    """Set the database's prepared_statements choice for a test, on a
    connection that has not decided yet (as a new one)."""
    connection.ensure_connection()
    raw = connection.connection
    before = raw.prepare_threshold, prepared._choices.get(connection.alias)

    def choose(choice):
        prepared.choose(connection.alias, choice)
        raw.prepare_threshold = None  # Django's default: OPTIONS set none
        prepared._seen.pop(raw, None)  # as a new connection: nothing run yet

    yield choose
    raw.prepare_threshold = before[0]
    if before[1] is None:
        prepared._choices.pop(connection.alias, None)
    else:
        prepared.choose(connection.alias, before[1])


@one_statement
def test_nothing_is_prepared_where_the_backend_says_false(prepared_choice):
    prepared_choice(False)
    before = prepared_statements()
    tasks.add.enqueue(1, 2)
    tasks.add.enqueue(3, 4)

    assert prepared_statements() == before
    assert connection.connection.prepare_threshold is None


@one_statement
@pytest.mark.skipif(
    not prepared.AUTO_PREPARES, reason="auto prepares from Django 6.1 on"
)
def test_a_direct_connection_prepares_our_statements_and_no_others(prepared_choice):
    prepared_choice("auto")
    assert prepared.reaches_the_server_itself(connection)
    before = prepared_statements()
    # Prepared from its second run: a connection that enqueues once (a web
    # request under CONN_MAX_AGE 0) never pays the round trip of preparing.
    tasks.add.enqueue(1, 2)
    assert prepared_statements() == before
    tasks.add.enqueue(3, 4)
    assert prepared_statements() > before

    # Django's cursors bind client-side and the threshold keeps anyone
    # else's statements unprepared, however often they run.
    for _ in range(10):
        Job.objects.filter(priority=-7).count()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s",
            ["%priority%-7%"],
        )
        assert cursor.fetchone()[0] == 0


def test_the_server_end_is_compared_with_the_client_end(tmp_path):
    def client(host, hostaddr, port):
        return SimpleNamespace(host=host, hostaddr=hostaddr, port=port)

    folders = "/var/run/postgresql, /tmp"
    # Direct, over TCP and over a socket.
    assert prepared.same_end(client("db", "10.0.0.5", 5432), "5432", "10.0.0.5", "")
    assert prepared.same_end(client("/tmp", "", 5432), "5432", None, folders)
    # A pooler: another port, another host, or a socket folder of its own.
    assert not prepared.same_end(client("db", "10.0.0.5", 6432), "5432", "10.0.0.5", "")
    assert not prepared.same_end(
        client("pool", "10.0.0.9", 5432), "5432", "10.0.0.5", ""
    )
    assert not prepared.same_end(client("/srv/pool", "", 5432), "5432", None, folders)
    # One socket folder, spelt another way.
    assert prepared.same_end(client("/tmp/", "", 5432), "5432", None, folders)
    linked = tmp_path / "linked"
    linked.symlink_to("/tmp")
    assert prepared.same_end(client(str(linked), "", 5432), "5432", None, folders)
    # Folders hidden from a user without pg_read_all_settings: not known to
    # be the server's, so nothing is prepared.
    assert not prepared.same_end(client("/tmp", "", 5432), "5432", None, None)


@one_statement
@pytest.mark.django_db
def test_a_user_without_pg_read_all_settings_can_ask_where_the_server_is():
    with connection.cursor() as cursor:
        # Undone with the test's transaction.
        role = f"sq_test_plain_user_{connection.settings_dict['NAME']}"
        cursor.execute(f"CREATE ROLE {role}")
        cursor.execute(f"SET ROLE {role}")
        try:
            cursor.execute(prepared.SERVER_END_SQL)
            port, _, folders = cursor.fetchone()
        finally:
            cursor.execute("RESET ROLE")
    assert port
    assert folders is None


@one_statement
def test_a_bulk_enqueue_of_many_batches_is_prepared_when_allowed():
    connection.ensure_connection()
    threshold = connection.connection.prepare_threshold
    connection.connection.prepare_threshold = 5  # OPTIONS["prepare_threshold"]
    calls = [((n, n), {}) for n in range(Job.objects.enqueue_batch_size() * 3)]
    try:
        results = enqueue_many(tasks.add, calls)
        results += enqueue_many(tasks.add, calls)
        assert prepared_statements() >= 1
    finally:
        connection.connection.prepare_threshold = threshold
    assert (
        Job.objects.filter(pk__in=[result.id for result in results]).count()
        == len(calls) * 2
    )


@one_statement
@pytest.mark.django_db(transaction=True)
def test_a_bulk_enqueue_on_postgresql_writes_every_batch_or_none():
    # Its batches are pipelined: sent together, they commit together.
    now = timezone.now()
    requests = [
        EnqueueRequest(
            Job.unsaved(
                queue_name=queue,
                task_path="tests.tasks.noop",
                arguments={"args": [], "kwargs": {}},
                enqueued_at=now,
            )
        )
        for queue in ["default"] * 4 + ["x" * 101]  # too long for the column
    ]
    with pytest.raises(DataError):
        Job.objects.enqueue_all(requests, batch_size=2)

    assert Job.objects.count() == 0
    assert ReadyExecution.objects.count() == 0
    Job.objects.enqueue_all(requests[:4], batch_size=2)
    assert Job.objects.count() == 4


@one_statement
def test_a_bulk_enqueue_makes_each_chunk_while_the_one_before_is_written():
    """The requests of a task without locks are drawn a chunk at a time: the
    chunk before is then on the server, and the one before that written."""
    size = 4
    now = timezone.now()
    made = []
    seen_when_drawn = []

    def requests():
        for number in range(size * 4):
            if number % size == 0:
                # What the chunks drawn so far show as this one is drawn.
                seen_when_drawn.append([chunk[0].pk is not None for chunk in made])
                made.append([])
            job = Job.unsaved(
                queue_name="default",
                task_path="tests.tasks.noop",
                arguments={"args": [number], "kwargs": {}},
                enqueued_at=now,
            )
            made[-1].append(job)
            yield EnqueueRequest(job)

    enqueued = Job.objects.enqueue_all(requests(), batch_size=size, lock_free=True)

    assert seen_when_drawn == [[], [False], [True, False], [True, True, False]]
    assert [e.job.arguments["args"] for e in enqueued] == [[n] for n in range(16)]
    assert Job.objects.filter(pk__in=[e.job.pk for e in enqueued]).count() == 16


@one_statement
@pytest.mark.django_db(transaction=True)
def test_overlapping_statements_run_one_at_a_time_while_the_next_is_made():
    """While the next statement is made, the server runs the one before it;
    while the caller has a statement's rows, it runs the next:
    pg_stat_activity, read from a second connection, shows this
    connection's backend on it. Each runs for ``pause`` (scaled with the
    machine's load); the server starts a statement sent a moment after it
    is sent, so each look waits up to a third of that for it."""
    from django.db import connections

    connection.ensure_connection()
    backend_pid = connection.connection.info.backend_pid
    watcher = connections.create_connection("default")
    pause = scaled(0.5)
    seen = []

    def statement(number):
        return f"SELECT {number}, pg_sleep({pause})"

    def look(what, number, expected):
        """Note what the backend runs, once it runs ``expected`` or a third
        of the pause has passed."""
        deadline = time.monotonic() + pause / 3
        while True:
            with watcher.cursor() as cursor:
                cursor.execute(
                    "SELECT state, query FROM pg_stat_activity WHERE pid = %s",
                    [backend_pid],
                )
                state, query = cursor.fetchone()
            running = query if state == "active" else None
            if running == expected or time.monotonic() > deadline:
                seen.append((what, number, running))
                return
            time.sleep(0.005)

    def statements():
        for number in range(3):
            if number:
                look("making", number, statement(number - 1))
            yield (statement(number), [])

    try:
        for rows in Job.objects.run_prepared_overlapping(statements()):
            # The last one's rows: nothing runs after it (not asked).
            if rows[0][0] < 2:
                look("rows", rows[0][0], statement(rows[0][0] + 1))
    finally:
        watcher.close()

    assert seen == [
        ("making", 1, statement(0)),
        ("rows", 0, statement(1)),
        ("making", 2, statement(1)),
        ("rows", 1, statement(2)),
    ]


@one_statement
def test_a_bulk_enqueue_without_pipeline_mode_writes_its_batches_in_turn(
    monkeypatch,
):
    import psycopg

    # A libpq older than 14 has no pipeline mode: the statements wait for
    # each other instead.
    monkeypatch.setattr(psycopg.Pipeline, "is_supported", classmethod(lambda _: False))
    calls = [((n, n), {}) for n in range(Job.objects.enqueue_batch_size() * 2 + 1)]

    results = enqueue_many(tasks.add, calls)

    assert [r.args for r in results] == [[n, n] for n in range(len(calls))]
    assert Job.objects.filter(pk__in=[r.id for r in results]).count() == len(calls)
    assert ReadyExecution.objects.filter(
        job_id__in=[r.id for r in results]
    ).count() == len(calls)


def test_the_enqueue_function_announces_on_the_channel_workers_listen_on():
    # The function is written out in its migration, which keeps its own copy
    # of the channel's name.
    from importlib import import_module

    from steady_queue.models.base import READY_CHANNEL

    migration = import_module("steady_queue.migrations.0010_enqueue_function")
    assert f"pg_notify('{READY_CHANNEL}'" in migration.CREATE_ENQUEUE_FUNCTION_SQL


@one_statement
def test_a_threshold_of_none_the_project_sets_prepares_nothing(prepared_choice):
    # Django's documentation gives it for transaction poolers: followed as is.
    prepared_choice("auto")
    options = connection.settings_dict.setdefault("OPTIONS", {})
    options["prepare_threshold"] = None
    try:
        before = prepared_statements()
        for n in range(3):
            tasks.add.enqueue(n, n)
        assert prepared_statements() == before
        assert connection.connection.prepare_threshold is None
    finally:
        del options["prepare_threshold"]


@one_statement
@pytest.mark.skipif(prepared.AUTO_PREPARES, reason="Django 6.1 shows prepared SQL")
def test_auto_prepares_nothing_where_query_capture_would_lose_the_sql(
    prepared_choice,
):
    # Django 5.2 and 6.0 record a prepared statement's SQL as None.
    prepared_choice("auto")
    before = prepared_statements()
    with CaptureQueriesContext(connection) as captured:
        for n in range(3):
            tasks.add.enqueue(n, n)
    assert prepared_statements() == before
    assert all(query["sql"] for query in captured)

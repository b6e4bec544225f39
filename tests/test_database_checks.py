"""W003, W004, W005 and E018: how the queue's database is set up for live processes."""

import pytest
from django.db import connection, connections

from steady_queue.conf import parse_options
from steady_queue.database_checks import (
    check_liveness,
    database_warnings,
    isolation_messages,
    longest_heartbeat_wait,
    sqlite_journal_warnings,
)

pytestmark = pytest.mark.django_db


def warnings_for(**options):
    return check_liveness(parse_options(options), "default")


def test_a_threshold_of_two_heartbeats_and_the_lock_wait_is_enough():
    wait = longest_heartbeat_wait("default")
    threshold = 2 * 60 + wait
    assert warnings_for(process_alive_threshold=threshold) == []
    assert warnings_for() == [], "the defaults (60 s, 300 s) are safe"


def test_a_threshold_a_late_heartbeat_can_outrun_is_warned():
    (warning,) = warnings_for(process_heartbeat_interval=10, process_alive_threshold=15)
    assert warning.id == "steady_queue.W004"
    assert "['process_alive_threshold'] (15 s)" in warning.msg
    assert "two heartbeat intervals (10 s each)" in warning.msg
    wait = longest_heartbeat_wait("default")
    assert warning.hint == f"Set process_alive_threshold to at least {20 + wait:g} s."


def test_sqlite_counts_its_busy_timeout_in_the_wait():
    if connection.vendor != "sqlite":
        assert longest_heartbeat_wait("default") == 0
        return
    timeout = connection.settings_dict["OPTIONS"].get("timeout", 5.0)
    assert longest_heartbeat_wait("default") == timeout
    (warning,) = warnings_for(process_heartbeat_interval=1, process_alive_threshold=5)
    assert f"the {timeout:g} s a write may wait for SQLite's lock" in warning.msg


def test_an_sqlite_database_without_wal_is_warned(tmp_path):
    if connection.vendor != "sqlite":
        pytest.skip("the journal is SQLite's")
    import sqlite3

    path = tmp_path / "rollback.sqlite3"
    sqlite3.connect(path).execute("PRAGMA journal_mode=DELETE").fetchall()
    # A connection to it as Django would make one, without WAL's init_command.
    rollback = type(connections["default"])(
        {**connection.settings_dict, "NAME": str(path), "OPTIONS": {}}, "rollback"
    )
    try:
        (warning,) = sqlite_journal_warnings(rollback, "rollback")
    finally:
        rollback.close()
    assert warning.id == "steady_queue.W003"
    assert "uses the 'delete' journal" in warning.msg
    assert "PRAGMA journal_mode=WAL;" in warning.hint
    # The test database runs in WAL, as the docs advise: nothing to say.
    assert database_warnings("default") == []


def test_the_database_checks_run_where_django_passes_databases():
    """Registered with the ``database`` tag: ``check --database`` and migrate
    run them, a plain ``check`` does not (tests/test_sqlite_journal_warning.py
    sees them in a new project's output)."""
    from django.core import checks

    from steady_queue.project_checks import check_queue_databases

    assert checks.Tags.database in check_queue_databases.tags
    assert check_queue_databases in checks.registry.registry.get_checks()
    # These servers can skip locked rows, and the test database is in WAL.
    ids = {m.id for m in checks.run_checks(databases=["default"])}
    assert not ids & {"steady_queue.W001", "steady_queue.W003"}


@pytest.fixture
def isolation_option():
    """Set the default database's OPTIONS['isolation_level'] for one test."""
    options = connection.settings_dict.setdefault("OPTIONS", {})
    missing = object()
    before = options.get("isolation_level", missing)

    def set_level(name):
        if connection.vendor == "postgresql":
            from django.db.backends.postgresql.psycopg_any import IsolationLevel

            options["isolation_level"] = IsolationLevel[name.upper().replace(" ", "_")]
        else:
            options["isolation_level"] = name

    yield set_level
    if before is missing:
        options.pop("isolation_level", None)
    else:
        options["isolation_level"] = before


def isolation_ids():
    return [message.id for message in isolation_messages("default")]


@pytest.mark.parametrize("level", ["repeatable read", "serializable"])
def test_a_stricter_isolation_level_is_warned_with_what_it_means(
    isolation_option, level
):
    if connection.vendor == "sqlite":
        assert isolation_ids() == [], "SQLite has no levels to choose"
        return
    isolation_option(level)
    (warning,) = isolation_messages("default")
    assert warning.id == "steady_queue.W005"
    assert "DATABASES['default']['OPTIONS']['isolation_level']" in warning.msg
    assert level.upper() in warning.msg
    assert "READ COMMITTED" in warning.msg
    assert "SQLSTATE 40001" in warning.msg


def test_read_committed_is_not_warned(isolation_option):
    if connection.vendor != "sqlite":
        isolation_option("read committed")
    assert isolation_ids() == []


def test_a_postgresql_server_default_stricter_than_read_committed_is_refused():
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's default_transaction_isolation")
    with connection.cursor() as cursor:
        cursor.execute("SET default_transaction_isolation = 'repeatable read'")
    try:
        (error,) = isolation_messages("default")
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET default_transaction_isolation")
    assert error.id == "steady_queue.E018"
    assert error.is_serious()
    assert "REPEATABLE READ" in error.msg
    assert "default_transaction_isolation" in error.hint
    assert "['OPTIONS']['isolation_level']" in error.hint

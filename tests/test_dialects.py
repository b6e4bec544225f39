"""Each database family's dialect, against the database the suite runs on."""

import pytest
from django.db import OperationalError, connection, connections, transaction

from steady_queue.dialects import dialect_for, is_lock_conflict
from steady_queue.models import Job, ReadyExecution
from tests.factories import make_job

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_connection_gets_its_own_familys_dialect():
    assert dialect_for(connection).vendor == connection.vendor


def test_delete_picked_returns_exactly_the_rows_it_deleted():
    jobs = [make_job("ready") for _ in range(3)]
    dialect = dialect_for(connection)
    quote = connection.ops.quote_name
    table = quote(ReadyExecution._meta.db_table)
    pick_sql = (
        f"SELECT {quote('job_id')} FROM {table} WHERE {quote('job_id')} IN (%s, %s)"
        f"{dialect.lock_clause(connection)}"
    )
    with transaction.atomic(), connection.cursor() as cursor:
        deleted = dialect.delete_picked(
            cursor, table, quote("job_id"), pick_sql, [jobs[0].pk, jobs[1].pk]
        )
        again = dialect.delete_picked(
            cursor, table, quote("job_id"), pick_sql, [jobs[0].pk, jobs[1].pk]
        )
    assert sorted(deleted) == [jobs[0].pk, jobs[1].pk]
    assert again == []
    assert list(ReadyExecution.objects.values_list("job_id", flat=True)) == [jobs[2].pk]


def test_the_row_estimate_is_a_number_of_rows():
    make_job("finished")
    with connection.cursor() as cursor:
        estimate = dialect_for(connection).estimated_rows(cursor, Job._meta.db_table)
    # Statistics may lag (PostgreSQL: -1 before the first ANALYZE).
    assert isinstance(estimate, int) and estimate >= -1


def test_the_database_clock_is_read_through_the_dialect():
    before = Job.objects.database_now()
    after = Job.objects.database_now()
    assert before.tzinfo is not None and before <= after


def test_lock_conflicts_are_told_from_other_errors():
    assert is_lock_conflict(OperationalError("database is locked"))
    assert not is_lock_conflict(OperationalError("no such table: x"))
    deadlock = OperationalError(1213, "Deadlock found when trying to get lock")
    assert is_lock_conflict(deadlock)


def test_a_lost_connection_is_never_the_rows_fault():
    from django.db import InterfaceError

    from steady_queue.dialects import is_connection_lost, refuses_the_row

    lost = OperationalError(2013, "Lost connection to MySQL server during query")
    gone = InterfaceError(0, "")
    refused = OperationalError(4025, "CONSTRAINT `jobs.arguments` failed")
    assert is_connection_lost(lost) and is_connection_lost(gone)
    assert not is_connection_lost(refused)
    # The database answers (a fresh connection would), yet the lost
    # connection says nothing about the row.
    assert not refuses_the_row(lost, connection)
    assert not refuses_the_row(gone, connection)
    assert refuses_the_row(refused, connection)


def test_a_database_is_named_by_where_it_is_and_never_by_its_password(monkeypatch):
    from steady_queue.dialects import database_identity, describe_database

    settings = {**connection.settings_dict, "PASSWORD": "s3cret-Pw0rd"}
    if connection.vendor != "sqlite":
        settings.update(HOST="db.example.com", PORT=6543, NAME="shop")
    # The wrapper itself: the ``connection`` proxy would not restore it.
    monkeypatch.setattr(connections["default"], "settings_dict", settings)

    identity = database_identity("default")
    described = describe_database("default")

    assert "s3cret" not in repr(identity) and "s3cret" not in described
    assert identity["vendor"] == connection.vendor
    if connection.vendor == "sqlite":
        assert identity["host"] is None and identity["port"] is None
        assert described == f"default (SQLite {identity['name']})"
        assert identity["name"].startswith("/")
    else:
        assert (identity["host"], identity["port"], identity["name"]) == (
            "db.example.com",
            "6543",
            "shop",
        )
        assert described == (
            f"default ({connection.display_name} 'shop' on db.example.com:6543)"
        )


class _StateError(Exception):
    """A driver error carrying a SQLSTATE, as psycopg's and PyMySQL's do."""

    def __init__(self, *args, sqlstate):
        super().__init__(*args)
        self.sqlstate = sqlstate


def refused_by_driver(*args, sqlstate):
    error = OperationalError(*args)
    error.__cause__ = _StateError(*args, sqlstate=sqlstate)
    return error


def test_a_row_too_large_is_the_rows_fault_though_mariadb_drops_the_link():
    from steady_queue.dialects import is_refused_row, refuses_the_row

    # MariaDB sends 1153 with SQLSTATE 08S01, a lost link's, and then drops
    # the connection; a retry would send the same packet.
    packet = refused_by_driver(
        1153, "Got a packet bigger than 'max_allowed_packet' bytes", sqlstate="08S01"
    )
    too_long = OperationalError(1406, "Data too long for column 'x' at row 1")
    jsonb = refused_by_driver(
        "total size of jsonb array elements exceeds the maximum", sqlstate="54000"
    )
    for error in (packet, too_long, jsonb):
        assert is_refused_row(error)
        assert refuses_the_row(error, connection)
    assert not is_refused_row(OperationalError(2006, "MySQL server has gone away"))
    assert not is_refused_row(refused_by_driver("terminating", sqlstate="57P01"))


def test_literal_ids_select_exactly_their_rows_and_refuse_what_is_not_a_number():
    from steady_queue.dialects.literal_ids import LiteralIds

    jobs = [make_job("finished") for _ in range(3)]
    picked = Job.objects.filter(pk__in=LiteralIds([jobs[0].pk, str(jobs[2].pk)]))
    assert sorted(picked.values_list("pk", flat=True)) == [jobs[0].pk, jobs[2].pk]
    assert not Job.objects.filter(pk__in=LiteralIds([])).exists()
    assert Job.objects.exclude(pk__in=LiteralIds([])).count() == 3
    with pytest.raises(ValueError):
        LiteralIds(["1) OR (1=1"])


def test_among_literal_ids_selects_exactly_their_rows_as_one_array_on_postgresql():
    from steady_queue.dialects.literal_ids import AmongLiteralIds

    jobs = [make_job("finished") for _ in range(3)]
    picked = Job.objects.filter(AmongLiteralIds("pk", [jobs[0].pk, str(jobs[2].pk)]))
    assert sorted(picked.values_list("pk", flat=True)) == [jobs[0].pk, jobs[2].pk]
    sql = str(picked.query)
    # One constant on PostgreSQL, whatever the number of ids; a list elsewhere.
    assert ("= ANY('{" in sql) == (connection.vendor == "postgresql"), sql
    assert not Job.objects.filter(AmongLiteralIds("pk", [])).exists()
    assert Job.objects.exclude(AmongLiteralIds("pk", [])).count() == 3
    with pytest.raises(ValueError):
        AmongLiteralIds("pk", ["1}'::bigint[]) OR (1=1"])


@pytest.mark.parametrize(
    "statements",
    [
        ["EXECUTE sq_never_prepared"],  # 26000: what a pooler's other server says
        ["PREPARE sq_twice AS SELECT 1", "PREPARE sq_twice AS SELECT 1"],  # 42P05
    ],
)
def test_a_prepared_statement_a_pooler_lost_is_reported_with_what_to_do(statements):
    from django.db import DatabaseError

    from steady_queue.dialects import database_error_line

    if connection.vendor != "postgresql":
        pytest.skip("prepared statements by name are PostgreSQL's")
    with pytest.raises(DatabaseError) as failed, connection.cursor() as cursor:
        for sql in statements:
            cursor.execute(sql)
    line = database_error_line(failed.value)
    assert "a pooler in transaction mode is between this process and PostgreSQL" in line
    assert "OPTIONS['prepared_statements']" in line
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")


def test_other_database_errors_get_no_pooler_hint():
    from django.db import DatabaseError

    from steady_queue.dialects import database_error_line

    with pytest.raises(DatabaseError) as failed, connection.cursor() as cursor:
        cursor.execute("SELECT * FROM sq_no_such_table")
    assert "pooler" not in database_error_line(failed.value)

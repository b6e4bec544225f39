"""The driver's way into the database of a project that is not a Django app
(BENCH_STORE=psycopg): one autocommit psycopg connection to BENCH_PG_DSN.

PostgreSQL only. Offers the names djangostore offers, and finished_stats() for
the projects' bench_api modules (pgqueuer's also enqueues on CONNECTION).
"""

import os

import psycopg
from psycopg import sql as pgsql

VENDOR = "postgresql"
CONNECTION = psycopg.connect(os.environ["BENCH_PG_DSN"], autocommit=True)


def quote(name: str) -> str:
    """name as a quoted SQL identifier."""
    return pgsql.Identifier(name).as_string(CONNECTION)


def table_names() -> list[str]:
    """Every table of the connection's schema."""
    rows = CONNECTION.execute(
        "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
    ).fetchall()
    return [name for (name,) in rows]


def execute(sql: str) -> None:
    """Run one statement (autocommit)."""
    CONNECTION.execute(sql)


def scalar(sql: str, params=()) -> object:
    """The first column of the first row of a query."""
    return CONNECTION.execute(sql, params).fetchone()[0]


def finished_stats(
    table: str, column: str, condition: str
) -> tuple[int, float | None, float | None]:
    """Count table's rows matching condition (SQL), and the earliest and latest
    value of the timestamp column among them as epoch seconds (benchapi's
    finished_stats, for projects without Django)."""
    count, first, last = CONNECTION.execute(
        f"SELECT count(*), extract(epoch FROM min({column})),"
        f" extract(epoch FROM max({column})) FROM {table} WHERE {condition}"
    ).fetchone()
    return (
        count,
        None if first is None else float(first),
        (None if last is None else float(last)),
    )


def flush(tables: list[str]) -> None:
    """Empty tables and restart their identities, in one statement."""
    if tables:
        names = ", ".join(quote(t) for t in tables)
        CONNECTION.execute(f"TRUNCATE {names} RESTART IDENTITY CASCADE")


def atomic():
    """One transaction; statements run inside on CONNECTION join it."""
    return CONNECTION.transaction()

"""The driver's way into a Django project's database (BENCH_STORE=django).

Sets Django up on import. The driver sees every store through the same few
names: VENDOR, table_names(), quote(), execute(), scalar(), flush(), atomic().
"""

import django

django.setup()

from django.core.management.color import no_style  # noqa: E402
from django.db import connection, transaction  # noqa: E402

VENDOR = connection.vendor
quote = connection.ops.quote_name
# Enqueue calls made inside join one transaction, committed on exit.
atomic = transaction.atomic


def table_names() -> list[str]:
    """Every table of the database."""
    return connection.introspection.table_names()


def execute(sql: str) -> None:
    """Run one statement, reading any rows it returns (MySQL's ANALYZE does)."""
    with connection.cursor() as cursor:
        cursor.execute(sql)
        if cursor.description:
            cursor.fetchall()


def scalar(sql: str, params=()) -> object:
    """The first column of the first row of a query."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()[0]


def flush(tables: list[str]) -> None:
    """Empty tables and reset their sequences, as Django's flush does."""
    sql = connection.ops.sql_flush(
        no_style(), tables, reset_sequences=True, allow_cascade=True
    )
    connection.ops.execute_sql_flush(sql)

"""After a transactional test, empty only the tables it wrote.

Django's TransactionTestCase ends each test with ``manage.py flush``: every
table is emptied (on PostgreSQL one TRUNCATE of all 36 tables, which gives
each table and index new files: 75-230 ms a test, ~200 s of a lane under
load), then post_migrate writes the content types and permissions again. A
test here writes three or four tables. One query finds those (an EXISTS per
table, under a millisecond), and only they are emptied, through the same
flush statements Django would use (TRUNCATE ... CASCADE on PostgreSQL; on
MariaDB and SQLite, DELETE). The content types, permissions and migration
records are kept, so post_migrate has nothing to write again.
"""

from django.core.management.color import no_style
from django.db import connections
from django.test import TransactionTestCase

# Written by migrate, never by a test: kept, as post_migrate would write them again.
KEPT = frozenset({"django_content_type", "auth_permission", "django_migrations"})


def written_tables(connection):
    """The project's tables that hold a row, in one query."""
    tables = [
        table
        for table in connection.introspection.django_table_names(
            only_existing=True, include_views=False
        )
        if table not in KEPT
    ]
    if not tables:
        return []
    quote = connection.ops.quote_name
    # FROM (a one-row subquery) rather than a bare WHERE: MariaDB wants a FROM.
    probe = " UNION ALL ".join(
        f"SELECT %s FROM (SELECT 1 AS one) AS probe{index} "
        f"WHERE EXISTS (SELECT 1 FROM {quote(table)})"
        for index, table in enumerate(tables)
    )
    with connection.cursor() as cursor:
        cursor.execute(probe, tables)
        return [table for (table,) in cursor.fetchall()]


def empty_written_tables(connection):
    tables = written_tables(connection)
    if tables:
        statements = connection.ops.sql_flush(no_style(), tables, allow_cascade=True)
        connection.ops.execute_sql_flush(statements)


def _fixture_teardown(self):
    if self.available_apps is not None or self.serialized_rollback:
        return _django_fixture_teardown(self)
    for name in self._databases_names(include_mirrors=False):
        empty_written_tables(connections[name])


_django_fixture_teardown = TransactionTestCase._fixture_teardown


def install():
    """Make every transactional test (pytest-django's included) end this way."""
    TransactionTestCase._fixture_teardown = _fixture_teardown

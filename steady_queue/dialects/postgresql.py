"""PostgreSQL: one-statement hot paths, LISTEN/NOTIFY, planner row estimates."""

import functools
from contextlib import contextmanager

from . import hot_cursors, prepared
from .base import Dialect

# 40P01 deadlock detected, 55P03 lock not available, 57014 statement cut off
# (statement_timeout, most often while it waited for a lock): the transaction
# was rolled back and may run again. Never a reason to give up on a row.
# 40001 a serialization failure (a transaction at REPEATABLE READ or
# SERIALIZABLE met a row changed since its snapshot) is one too.
LOCK_CONFLICT_STATES = {"40001", "40P01", "55P03", "57014"}

# The transaction's lock_timeout, read as it is set for the next statement;
# NO_LOCK_WAIT gives up on a lock at once (55P03).
LOCK_TIMEOUT_SQL = (
    "SELECT current_setting('lock_timeout'), set_config('lock_timeout', %s, true)"
)
SET_LOCK_TIMEOUT_SQL = "SELECT set_config('lock_timeout', %s, true)"
NO_LOCK_WAIT = "1ms"

# Class 08 (connection exception) and 57P01-57P03 (the server is shutting
# down or restarting): the connection is gone, whatever the statement was.
CONNECTION_LOST_STATES = {"57P01", "57P02", "57P03"}

# 54000 a value over a limit (a jsonb over 255 MiB), 22021 a byte sequence
# invalid in the encoding, 22P05 text that cannot be translated (a NUL in
# jsonb): the row's contents are refused, whatever is tried again.
REFUSED_ROW_STATES = {"54000", "22021", "22P05"}

# Announce the backend aliases with new ready jobs; delivered when the
# transaction commits.
ANNOUNCE_READY_SQL = "SELECT pg_notify(%s, name) FROM unnest(%s::text[]) AS name"

# Sent before a claim, in its pipeline: one round trip, and one implicit
# transaction, so the settings end with the claim. Without planner statistics
# (a burst loaded before autovacuum ran) a filtered claim (a queue prefix, an
# excluded or paused queue) is estimated at one row, and PostgreSQL reads every
# ready row through a bitmap scan, then sorts them all: 27 ms a claim on
# 50,000 ready rows instead of 0.05 ms. With neither a bitmap scan nor a sort
# to choose, the claim index's ordered scan is the plan left, whatever the
# statistics (docs/performance.rst). A path turned off only costs more, so the
# claim's total estimate (its final sort of a few rows has no other way)
# would cross jit_above_cost: JIT, tens of milliseconds of compiling for a
# statement that runs in a tenth of one, is turned off with them. The rows
# picked are then deleted from the ready table's slots and joined to their
# jobs by key: without statistics on the slots (new partitions, which
# autovacuum has not analyzed) the planner hashed every slot and the jobs
# table instead, 5 ms a claim on a backlog of 30,000 against 0.4 ms by key
# lookups, so hash and merge joins are turned off too. So are sequential
# scans: a slot that is empty when the plan is made reads cheapest that way,
# and a plan kept for the connection would then scan the slot once per row
# picked after it has filled.
CLAIM_PLAN_SQL = (
    "SELECT set_config('enable_bitmapscan', 'off', true), "
    "set_config('enable_seqscan', 'off', true), "
    "set_config('enable_sort', 'off', true), "
    "set_config('enable_hashjoin', 'off', true), "
    "set_config('enable_mergejoin', 'off', true), set_config('jit', 'off', true)"
)

# The planner's estimate of a table's rows, kept up to date by (auto)vacuum.
ESTIMATED_ROWS_SQL = "SELECT reltuples::bigint FROM pg_class WHERE oid = %s::regclass"


def bigint_array(ids):
    """Integers as one PostgreSQL array literal, for a ``%s::bigint[]``
    parameter: psycopg passes the text as it is, where a list has each
    element inspected and dumped (a fifth of a mark's CPU here)."""
    return "{" + ",".join([f"{id_:d}" for id_ in ids]) + "}"


class PostgreSQL(Dialect):
    vendor = "postgresql"
    runs_hot_paths_in_one_statement = True
    announces_ready_jobs = True
    # KEY SHARE: blocks the row's deletion, not its heartbeat updates.
    share_lock_clause = " FOR KEY SHARE"
    claim_plan_sql = CLAIM_PLAN_SQL
    slots_ready_table = True

    def in_a_transaction(self, raw):
        # psycopg 3's libpq status, or psycopg2's: INTRANS (2) or INERROR (3).
        pgconn = getattr(raw, "pgconn", None)
        if pgconn is not None:
            return pgconn.transaction_status in (2, 3)
        return raw.get_transaction_status() in (2, 3)

    def isolation_level(self, settings):
        value = settings.get("OPTIONS", {}).get("isolation_level")
        if value is None:
            # The server's default_transaction_isolation: READ COMMITTED
            # unless set otherwise (W005 reads it).
            return "read committed"
        from django.db.backends.postgresql.psycopg_any import IsolationLevel

        try:
            return IsolationLevel(value).name.replace("_", " ").lower()
        except ValueError:
            return None  # Django refuses it when it connects

    def execute_without_lock_wait(self, cursor, sql, params):
        # SET LOCAL, undone by the savepoint's rollback if the statement fails,
        # and put back by hand if it does not. (A lock_timeout of 0 is none.)
        cursor.execute(LOCK_TIMEOUT_SQL, [NO_LOCK_WAIT])
        before, _ = cursor.fetchone()
        cursor.execute(sql, params)
        cursor.execute(SET_LOCK_TIMEOUT_SQL, [before])

    def preparing_cursor(self, connection):
        # Django's psycopg cursors bind parameters client-side, which psycopg
        # never prepares. A server-binding cursor asks for each statement to
        # be prepared, and psycopg does so when the connection allows it:
        # Django turns prepared statements off unless OPTIONS sets
        # "prepare_threshold" (connection poolers in transaction mode need
        # them off); prepared.allow_ours turns them on for our statements
        # where the connection reaches the server itself. Prepared, the
        # hot path's CTE statements are planned once per connection (single
        # enqueue measured 23-31 % faster, docs/performance.rst).
        hot_cursors.connect(connection)
        prepared.allow_ours(connection)
        if hot_cursors.watched(connection, _djangos_wrapper()):
            # Made by connection.cursor(), so that every wrapper Django or a
            # tool puts around cursors (query capture, the debug toolbar,
            # execute_wrapper) wraps it too.
            return _preparing(connection, connection.cursor)
        return hot_cursors.take(
            connection, lambda: _preparing(connection, connection.create_cursor)
        )

    @contextmanager
    def pipelining(self, connection):
        # psycopg's pipeline mode (libpq 14 or later; without it, statements
        # wait for each other as usual). Outside a transaction, the statements
        # sent in one pipeline form one implicit transaction, committed as it
        # ends (a failed statement rolls back the others). Errors raised as it
        # ends are Django's, like those of its cursors.
        from psycopg import Pipeline

        if not Pipeline.is_supported():
            yield
            return
        connection.ensure_connection()
        with connection.wrap_database_errors, connection.connection.pipeline():
            yield

    def delete_picked_sql(self, table, key, pick_sql, columns):
        # The picked keys as a materialized CTE, not an IN subquery: joined
        # to the same table, the planner sized a merge join from the key
        # index's lowest live entry, walking every dead one below it (63 ms
        # to plan a 2,000-job delete after a million were cleared, 3 ms so).
        returned = ", ".join(f"{table}.{column}" for column in columns)
        return (
            f"WITH picked (picked_key) AS MATERIALIZED ({pick_sql}) "
            f"DELETE FROM {table} USING picked "
            f"WHERE {table}.{key} = picked.picked_key RETURNING {returned}"
        )

    def commit_unflushed(self, cursor):
        # This transaction alone; the server may lose its last such commits
        # in a crash (never a later commit's), as if they had not been made.
        cursor.execute("SET LOCAL synchronous_commit TO OFF")

    def now_sql(self):
        # The statement's start, not the transaction's: a long transaction
        # must not report a stale now.
        return "SELECT statement_timestamp()"

    def now_at_least_sql(self):
        # The statement's start: the clock's resolution (1 µs) is the column's.
        return "statement_timestamp()"

    def now_at_least_plus_sql(self, seconds_column):
        return f"statement_timestamp() + {seconds_column} * interval '1 second'"

    def seconds_between_sql(self, start_column, end_column):
        return f"EXTRACT(EPOCH FROM ({end_column} - {start_column}))::float"

    def estimated_rows(self, cursor, table):
        cursor.execute(ESTIMATED_ROWS_SQL, [table])
        row = cursor.fetchone()
        return row[0] if row else 0

    def announce_ready(self, cursor, channel, backend_names):
        cursor.execute(ANNOUNCE_READY_SQL, [channel, sorted(set(backend_names))])

    def is_connection_lost(self, error):
        from django.db import OperationalError

        cause = error.__cause__ or error
        state = getattr(cause, "sqlstate", None)
        if state is None:
            # psycopg reports a dropped connection ("the connection is lost",
            # "consuming input failed") with no SQLSTATE at all.
            return isinstance(error, OperationalError) and _is_psycopg(cause)
        return state.startswith("08") or state in CONNECTION_LOST_STATES

    def is_lock_conflict(self, error):
        cause = error.__cause__ or error
        return getattr(cause, "sqlstate", None) in LOCK_CONFLICT_STATES

    def is_refused_row(self, error):
        cause = error.__cause__ or error
        return getattr(cause, "sqlstate", None) in REFUSED_ROW_STATES


def _preparing(connection, make):
    """A cursor of ``make()``'s, made as a preparing one (the factory is
    swapped only for that call, on a connection no other thread uses)."""
    raw = connection.connection
    default = raw.cursor_factory
    raw.cursor_factory = _preparing_cursor_class()
    try:
        return make()
    finally:
        raw.cursor_factory = default


@functools.cache
def _djangos_wrapper():
    """Django's own connection class for PostgreSQL; imported on first use."""
    from django.db.backends.postgresql.base import DatabaseWrapper

    return DatabaseWrapper


@functools.cache
def _preparing_cursor_class():
    """Django's server-binding psycopg cursor, asking to prepare what it runs;
    imported on first use, as psycopg may be absent."""
    from django.db.backends.postgresql.base import ServerBindingCursor

    class PreparingCursor(ServerBindingCursor):
        def execute(self, query, params=None, *, prepare=None, binary=None):
            if prepare is None:
                prepare = prepared.prepare_now(self.connection, query)
            return super().execute(query, params, prepare=prepare, binary=binary)

    return PreparingCursor


def _is_psycopg(error):
    return type(error).__module__.startswith("psycopg")

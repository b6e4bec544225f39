"""Our own transactions at READ COMMITTED, whatever the connection's level.

Every limit (concurrency slots, rate windows, unique keys) is a row that a
transaction locks, and then counts or reads what others committed under it.
At READ COMMITTED each statement sees what committed before it started, so
what was read after the lock is current. At REPEATABLE READ or SERIALIZABLE
(Django's ``DATABASES[...]['OPTIONS']['isolation_level']``) a transaction
reads from a snapshot taken at its first statement: a count made after the
lock misses what committed since, and on PostgreSQL a changed row raises a
serialization failure (SQLSTATE 40001) where READ COMMITTED would wait and
read it again.

So every transaction steady_queue opens itself (atomic() here, outside any
caller's block) runs at READ COMMITTED whatever the connection's level; the
project's own transactions keep theirs. An enqueue that joins a caller's
transaction at a stricter level cannot change it: there the limits are kept
by conflicts (in_a_snapshot() below; the caller's transaction fails with a
serialization error to retry, never admits a job too many).
"""

from contextlib import contextmanager

from django.db import DEFAULT_DB_ALIAS, OperationalError, connections, transaction

from . import dialect_for

# Levels at which a transaction reads from a snapshot (or, on MySQL, where a
# plain read in a transaction does), from the weakest.
STRICT_LEVELS = ("repeatable read", "serializable")

# Marks a connection wrapper whose outermost atomic block is ours (at READ
# COMMITTED) while it lasts.
OWN_MARK = "_steady_queue_read_committed"


class StaleSnapshot(OperationalError):
    """A caller's transaction reads from a snapshot older than a row an
    enqueue needs (a limit's row created since): it must be run again, as
    for a serialization failure (whose SQLSTATE it carries)."""

    sqlstate = "40001"

    def __init__(self, alias, what):
        level = isolation_level(connections[alias])
        super().__init__(
            f"This transaction runs at {level.upper()} "
            f"(DATABASES[{alias!r}]['OPTIONS']['isolation_level']) and its "
            f"snapshot predates {what}, committed by another transaction since: "
            "the enqueue cannot keep its limits in it. Roll back and run the "
            "transaction again (as for any serialization failure at that "
            "level), or enqueue outside it (transaction.on_commit)."
        )


def isolation_level(connection):
    """The level the connection's transactions run at, as its settings say
    ("read committed", "repeatable read", "serializable", ...); None where
    the database has no levels to choose (SQLite)."""
    return dialect_for(connection).isolation_level(connection.settings_dict)


def runs_stricter(connection):
    """Whether the connection's transactions run at a level stricter than
    READ COMMITTED."""
    return isolation_level(connection) in STRICT_LEVELS


def in_a_snapshot(connection):
    """Whether the statements run now read from a snapshot: inside a
    caller's transaction at a stricter level (never in ours)."""
    return (
        connection.in_atomic_block
        and not getattr(connection, OWN_MARK, False)
        and runs_stricter(connection)
    )


@contextmanager
def atomic(using=None, savepoint=True):
    """Django's transaction.atomic(); the outermost block runs at READ
    COMMITTED, whatever level the connection is set to.

    Inside a caller's block it is a savepoint (or nothing, without
    ``savepoint``) in the caller's transaction, at the caller's level.
    """
    alias = using or DEFAULT_DB_ALIAS
    connection = connections[alias]
    outermost = not connection.in_atomic_block
    with transaction.atomic(using=alias, savepoint=savepoint):
        if not (outermost and runs_stricter(connection)):
            yield
            return
        # The transaction's first statement: PostgreSQL takes it after
        # psycopg's BEGIN ISOLATION LEVEL ... (nothing has read yet); MySQL
        # before the transaction's first statement, for that transaction.
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
        setattr(connection, OWN_MARK, True)
        try:
            yield
        finally:
            setattr(connection, OWN_MARK, False)

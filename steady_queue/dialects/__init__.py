"""What differs between database families, in one object per family.

Models and processes ask ``dialect_for(connection)`` and never test a vendor:
every statement or clause that is written differently per database lives in
the family's module here.
"""

import time

from django.db import DatabaseError, InterfaceError, OperationalError, connections

from . import prepared
from .base import Dialect
from .mysql import MySQL
from .postgresql import PostgreSQL
from .sqlite import SQLite

DIALECTS = {dialect.vendor: dialect for dialect in (PostgreSQL(), MySQL(), SQLite())}


def dialect_for(connection):
    """The dialect of a Django connection (an unknown vendor gets the base one)."""
    return DIALECTS.get(connection.vendor, FALLBACK)


def database_identity(alias):
    """Which database a DATABASES alias reaches: its alias, vendor, host, port
    and name (for SQLite, the file's path); never the password."""
    connection = connections[alias]
    return {
        "alias": alias,
        "vendor": connection.vendor,
        **dialect_for(connection).location(connection.settings_dict),
    }


def describe_database(alias):
    """A DATABASES alias in words, as the supervisor's log and ``status`` name
    it: "default (PostgreSQL 'app' on 127.0.0.1:5432)", "default (SQLite
    /srv/site/db.sqlite3)"."""
    connection = connections[alias]
    dialect = dialect_for(connection)
    try:
        family = connection.display_name
    except DatabaseError:
        family = connection.vendor  # MySQL's asks the server: MariaDB or not
    where = dialect.location_in_words(dialect.location(connection.settings_dict))
    return f"{alias} ({family} {where})"


def is_lock_conflict(error):
    """Whether a database error is a lock conflict (deadlock, lock wait, or a
    statement cut off by a statement timeout) that is safe to retry. Asked of
    every family: the error does not say its database."""
    return any(dialect.is_lock_conflict(error) for dialect in DIALECTS.values())


def refuses_the_row(error, connection):
    """Whether a database error is about the rows written, not the database.

    A lock conflict or a connection that no longer answers says nothing about
    the row: the write may work next time, so no one may give up on the row
    for it (fail a job without writing it, say). Anything else, while a
    trivial query still works, is the row's own.
    """
    if is_refused_row(error):
        # MariaDB drops the connection after refusing a packet over its
        # max_allowed_packet (SQLSTATE 08S01, as a lost link): a fresh
        # connection will do, the database is fine.
        if not answers(connection):
            connection.close()
        return True
    if is_lock_conflict(error) or is_connection_lost(error):
        return False
    # Not enough alone: a failed rollback makes Django drop the connection,
    # so this may be a fresh one answering for a dead one (hence the check
    # above).
    return answers(connection)


def is_connection_lost(error):
    """Whether a database error says the connection itself is gone."""
    if isinstance(error, InterfaceError):
        return True
    return any(dialect.is_connection_lost(error) for dialect in DIALECTS.values())


def is_refused_row(error):
    """Whether a database error says the row itself cannot be stored (too
    large, text the column cannot hold), whatever the connection's state."""
    return any(dialect.is_refused_row(error) for dialect in DIALECTS.values())


def answers(connection):
    """Whether a trivial query works on this connection now."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return True
    except Exception:
        return False


FALLBACK = Dialect()
LOCK_RETRIES = 5


def retrying_lock_conflicts(function, *args, **kwargs):
    """Call function, running it again when the database reports a lock conflict."""
    for attempt in range(LOCK_RETRIES):
        try:
            return function(*args, **kwargs)
        except OperationalError as error:
            if not is_lock_conflict(error) or attempt == LOCK_RETRIES - 1:
                raise
            time.sleep(0.01 * (attempt + 1))


def retrying_own_transaction(connection, function, *args, **kwargs):
    """Call function, which runs a transaction of its own on ``connection``
    (atomic()), again on a lock conflict; once only inside a caller's block.

    A deadlock rolls back the whole transaction: ours can run again, but
    inside a caller's atomic() it was the caller's transaction that was lost,
    and the caller's to retry.
    """
    if connection.in_atomic_block:
        return function(*args, **kwargs)
    return retrying_lock_conflicts(function, *args, **kwargs)


__all__ = [
    "Dialect",
    "answers",
    "database_identity",
    "describe_database",
    "dialect_for",
    "is_connection_lost",
    "is_lock_conflict",
    "refuses_the_row",
    "retrying_lock_conflicts",
    "retrying_own_transaction",
]


def database_error_line(error):
    """The first line of a database error, with its class: for one-line reports."""
    first = (str(error).strip().splitlines() or [""])[0]
    hint = prepared.pooler_hint(error)
    return f"{type(error).__name__}: {first}" + (f"; {hint}" if hint else "")

"""Checks of how the queue's database is set up for live processes.

W004 reads the settings alone; W001, W003, W005 and E018 read the database,
so Django runs them only where it passes databases (checks tagged ``database``:
``manage.py check --database``, ``migrate``), and ``manage.py steady_queue``
asks them itself (its ``check``, and a supervisor's start).

A process proves it lives by writing its heartbeat; the supervisor prunes one
whose last heartbeat is older than ``process_alive_threshold``. Whatever makes
heartbeat writes wait (SQLite's one write lock, held long by readers without
WAL) can make a live process look dead: its claims are then failed while it
still runs them.
"""

from django.core import checks
from django.db import DatabaseError, connections

from .dialects import dialect_for
from .dialects.isolation import isolation_level, runs_stricter

# Python's sqlite3 waits this long for the write lock unless OPTIONS say.
SQLITE_DEFAULT_TIMEOUT = 5.0


def check_liveness(options, alias):
    """W004 for one backend's OPTIONS (no database access)."""
    return list(_check_threshold(options, alias))


def database_warnings(database):
    """W001, W003, W005 and E018 for one queue database: they read it."""
    return [
        *locking_warnings(database),
        *sqlite_journal_warnings(connections[database], database),
        *isolation_messages(database),
    ]


def isolation_messages(database):
    """W005 when the database's transactions run at REPEATABLE READ or
    SERIALIZABLE (its OPTIONS say so): steady_queue's own run at READ
    COMMITTED, and the project's enqueues with limits may fail with a
    serialization error. E018 when the PostgreSQL server's default is
    stricter than READ COMMITTED: statements outside any transaction would
    run at it too, and no OPTIONS change that."""
    connection = connections[database]
    messages = []
    server_level = _server_default_level(connection)
    if server_level is not None and server_level != "read committed":
        messages.append(
            checks.Error(
                f"The database {database!r} runs transactions at "
                f"{server_level.upper()} by the server's default "
                "(default_transaction_isolation): steady_queue's claims and "
                "finishes, which run outside any transaction, would read "
                "from snapshots and could let jobs past their limits.",
                hint=(
                    "Set default_transaction_isolation back to 'read "
                    "committed' (ALTER DATABASE or ALTER ROLE ... RESET "
                    "default_transaction_isolation), and give your own code "
                    "its level with DATABASES"
                    f"[{database!r}]['OPTIONS']['isolation_level']: "
                    "steady_queue's transactions then run at READ COMMITTED."
                ),
                id="steady_queue.E018",
            )
        )
    if runs_stricter(connection):
        level = isolation_level(connection).upper()
        messages.append(
            checks.Warning(
                f"DATABASES[{database!r}]['OPTIONS']['isolation_level'] runs "
                f"its transactions at {level}. steady_queue's own "
                "transactions run at READ COMMITTED whatever it says; a task "
                "with a concurrency, rate or unique limit enqueued inside one "
                f"of your transactions at {level} can fail with a "
                "serialization error (SQLSTATE 40001) instead of passing the "
                "limit.",
                hint=(
                    "Retry such transactions on a serialization failure, as "
                    "every transaction at that level must be; or enqueue "
                    "outside them (transaction.on_commit). Silence this once "
                    "they do."
                ),
                id="steady_queue.W005",
            )
        )
    return messages


def _server_default_level(connection):
    """The PostgreSQL server's default_transaction_isolation, lower case;
    None elsewhere or where it cannot be read."""
    if connection.vendor != "postgresql":
        return None
    try:
        with connection.cursor() as cursor:
            cursor.execute("SHOW default_transaction_isolation")
            return cursor.fetchone()[0].lower()
    except DatabaseError:
        return None  # unreachable: E005 and the connection's own error say so


def locking_warnings(database):
    """W001 when the database cannot skip locked rows (and has row locks)."""
    connection = connections[database]
    if dialect_for(connection).serialises_writers or (
        connection.features.has_select_for_update_skip_locked
    ):
        return []
    return [
        checks.Warning(
            f"The database {database!r} ({connection.display_name}) does not "
            "support SELECT ... FOR UPDATE SKIP LOCKED. Workers will wait on "
            "each other's row locks when claiming jobs, so adding workers adds "
            "little throughput.",
            hint="Use PostgreSQL, MySQL 8+ or MariaDB 10.6+.",
            id="steady_queue.W001",
        )
    ]


def longest_heartbeat_wait(database):
    """How long one heartbeat write may wait for a lock, in seconds (0: none)."""
    connection = connections[database]
    if not dialect_for(connection).serialises_writers:
        # Row locks: a heartbeat updates its own row, which nobody else holds.
        return 0.0
    timeout = connection.settings_dict.get("OPTIONS", {}).get("timeout")
    return float(SQLITE_DEFAULT_TIMEOUT if timeout is None else timeout)


def _check_threshold(options, alias):
    interval = options.process_heartbeat_interval
    wait = longest_heartbeat_wait(options.database)
    # One beat may be missed (a slow poll, a restart of the connection) and the
    # next may wait out the lock before it is written.
    needed = 2 * interval + wait
    if options.process_alive_threshold >= needed:
        return []
    waits = f" plus the {wait:g} s a write may wait for SQLite's lock" if wait else ""
    return [
        checks.Warning(
            f"TASKS[{alias!r}]['OPTIONS']['process_alive_threshold'] "
            f"({options.process_alive_threshold:g} s) is shorter than two "
            f"heartbeat intervals ({interval:g} s each){waits}: a live process "
            "whose heartbeat is late once is pruned, and the jobs it is running "
            "are failed while they still run.",
            hint=f"Set process_alive_threshold to at least {needed:g} s.",
            id="steady_queue.W004",
        )
    ]


def sqlite_journal_warnings(connection, database):
    """W003 when ``connection`` is to an SQLite file not in WAL mode."""
    if connection.vendor != "sqlite" or connection.is_in_memory_db():
        return []
    try:
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA journal_mode")
            (mode,) = cursor.fetchone()
    except DatabaseError:
        return []  # unreachable: E005 and the connection's own error say so
    if mode.lower() == "wal":
        return []
    return [
        checks.Warning(
            f"The SQLite database {database!r} uses the {mode!r} journal, in "
            "which a reader blocks every writer: a long admin page or report "
            "delays heartbeats and claims, and a live worker can be pruned.",
            hint=(
                'Turn on WAL: add "init_command": "PRAGMA journal_mode=WAL;" '
                f"to DATABASES[{database!r}]['OPTIONS'] (it is kept in the "
                'database file), and a "timeout" of 20 s.'
            ),
            id="steady_queue.W003",
        )
    ]

"""The guard around every poll: survive lost connections, retry lock conflicts."""

import logging
import time

from django.db import (
    DatabaseError,
    Error,
    InterfaceError,
    OperationalError,
    connections,
)

from ..dialects import database_error_line, retrying_lock_conflicts

logger = logging.getLogger("steady_queue")


class DatabaseGuard:
    """Runs a unit of work; on database errors logs, reconnects and backs off."""

    def __init__(self, database, owner, max_backoff=30.0):
        self.database = database
        self.owner = owner
        self.max_backoff = max_backoff
        self.failures = 0
        # time.monotonic() of the last failed call; None if none failed yet.
        self.last_failure_at = None

    def call(self, function):
        """Return (True, function()) or, if it failed, (False, seconds to back off)."""
        try:
            value = retrying_lock_conflicts(function)
        except (OperationalError, InterfaceError, DatabaseError) as error:
            self.failures += 1
            self.last_failure_at = time.monotonic()
            # A broken connection must not be reused; the next call reconnects.
            close_quietly(self.database)
            delay = self.backoff()
            logger.warning(
                "%s: database error (%s); retrying in %.1fs",
                self.owner,
                database_error_line(error),
                delay,
            )
            return False, delay
        except Exception:
            self.failures += 1
            self.last_failure_at = time.monotonic()
            delay = self.backoff()
            logger.exception(
                "%s: unexpected error; retrying in %.1fs", self.owner, delay
            )
            return False, delay
        if self.failures:
            logger.info("%s: database reachable again", self.owner)
            self.failures = 0
        return True, value

    def seconds_since_failure(self):
        """Seconds since the last failed call, or infinity if none failed."""
        if self.last_failure_at is None:
            return float("inf")
        return time.monotonic() - self.last_failure_at

    def backoff(self):
        return min(self.max_backoff, 0.5 * 2 ** min(self.failures - 1, 6))


def close_quietly(database=None):
    """Close this thread's connection (or all of them); a broken one may raise."""
    targets = (
        [connections[database]] if database else connections.all(initialized_only=True)
    )
    for connection in targets:
        forget_a_leaked_transaction(connection)
        try:
            connection.close()
        except Error:
            # Closing a connection the server already dropped (PyMySQL: "Already
            # closed", an Error that is no DatabaseError) must not turn a handled
            # outage into a crash; Django has dropped its handle anyway, so the
            # next query reconnects.
            pass


def forget_a_leaked_transaction(connection):
    """Clear Django's "in a transaction" state that no atomic block owns.

    Only for callers outside every atomic block (the guard, between polls).
    When a COMMIT's closing ``SET autocommit=1`` fails on a killed
    connection, Django keeps autocommit off; the next atomic() then believes
    a transaction is open, fails on its SAVEPOINT, and leaves
    ``in_atomic_block`` set with no block to clear it. Every later query
    would fail ("Cannot open a new connection in an atomic block"), for
    good: a worker would hold its claims and never record them.
    """
    if connection.in_atomic_block and not connection.atomic_blocks:
        connection.in_atomic_block = False
        connection.savepoint_ids = []
        connection.needs_rollback = False
        connection.closed_in_transaction = False
        connection.commit_on_exit = True

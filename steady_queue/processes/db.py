"""The guard around every poll: survive lost connections, retry lock conflicts."""

import logging
import time

from django.db import (
    DatabaseError,
    InterfaceError,
    OperationalError,
    connections,
)

from ..dialects import database_error_line, retrying_lock_conflicts
from ..dialects.leaked_transactions import close_rolling_back

logger = logging.getLogger("steady_queue")


# The wait before trying the database again: 0.5 s after the first failure,
# doubling, but never more than MAX_BACKOFF. Work resumes within that long of
# the database's return however long it was gone (with a 30 s cap, 14-17 s
# after a 20 s outage); a refused connection every two seconds per process
# is no load for a server coming back up.
FIRST_BACKOFF = 0.5
MAX_BACKOFF = 2.0
# Once the wait is at its cap, an outage's warnings are repeated this often
# at most, each counting the failures since the last (not one every 2 s).
QUIET_LOG_INTERVAL = 30.0


def backoff_after(failures, cap=MAX_BACKOFF):
    """Seconds to wait after ``failures`` failed attempts in a row."""
    return min(cap, FIRST_BACKOFF * 2 ** min(failures - 1, 6))


class QuietRepeats:
    """Which failures of one outage to log: each while the wait before the
    next attempt still grows, then one every QUIET_LOG_INTERVAL."""

    def __init__(self):
        # time.monotonic() of the last failure logged at the longest wait,
        # and the failures left out since.
        self.logged_capped_at = None
        self.left_out = 0

    def note(self, capped):
        """Count a failure (``capped``: its wait is the longest); return None
        to leave it out of the log, else the text to end its line with."""
        now = time.monotonic()
        if not capped:
            return ""
        if (
            self.logged_capped_at is not None
            and now - self.logged_capped_at < QUIET_LOG_INTERVAL
        ):
            self.left_out += 1
            return None
        self.logged_capped_at = now
        left_out, self.left_out = self.left_out, 0
        return f" ({left_out} more failures since the last warning)" if left_out else ""


class DatabaseGuard:
    """Runs a unit of work; on database errors logs, reconnects and backs off."""

    def __init__(self, database, owner, max_backoff=MAX_BACKOFF):
        self.database = database
        self.owner = owner
        self.max_backoff = max_backoff
        self.failures = 0
        # time.monotonic() of the last failed call; None if none failed yet.
        self.last_failure_at = None
        self.warnings = QuietRepeats()

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
            left_out = self.warnings.note(capped=delay >= self.max_backoff)
            if left_out is not None:
                logger.warning(
                    "%s: database error (%s); retrying in %.1fs%s",
                    self.owner,
                    database_error_line(error),
                    delay,
                    left_out,
                )
            return False, delay
        except Exception:
            self.failures += 1
            self.last_failure_at = time.monotonic()
            delay = self.backoff()
            left_out = self.warnings.note(capped=delay >= self.max_backoff)
            if left_out is not None:
                logger.exception(
                    "%s: unexpected error; retrying in %.1fs%s",
                    self.owner,
                    delay,
                    left_out,
                )
            return False, delay
        if self.failures:
            logger.info(
                "%s: database reachable again (after %d failed attempts)",
                self.owner,
                self.failures,
            )
            self.failures = 0
            self.warnings = QuietRepeats()
        return True, value

    def seconds_since_failure(self):
        """Seconds since the last failed call, or infinity if none failed."""
        if self.last_failure_at is None:
            return float("inf")
        return time.monotonic() - self.last_failure_at

    def backoff(self):
        """Seconds to wait before the next attempt, after the failures so far."""
        return backoff_after(self.failures, self.max_backoff)


def close_pools():
    """Close this process's connection pools (Django's ``OPTIONS["pool"]``
    on PostgreSQL) before a fork: a child would inherit the sockets of their
    idle connections, on which parent and child would read each other's
    results, and a pool whose threads the fork left behind. Each process
    makes its own again when it next connects."""
    for connection in connections.all(initialized_only=True):
        # Django's PostgreSQL backend has the verb (5.1 and later); another
        # backend given the option pools its own way, or not at all.
        close_pool = getattr(connection, "close_pool", None)
        if close_pool is not None and connection.settings_dict["OPTIONS"].get("pool"):
            close_pool()


def close_quietly(database=None):
    """Close this thread's connection (or all of them); a broken one may raise."""
    targets = (
        [connections[database]] if database else connections.all(initialized_only=True)
    )
    for connection in targets:
        close_rolling_back(connection)

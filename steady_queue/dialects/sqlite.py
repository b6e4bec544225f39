"""SQLite: one writer at a time, so no row locks; DELETE ... RETURNING works."""

from .base import Dialect


class SQLite(Dialect):
    vendor = "sqlite"
    serialises_writers = True

    def now_sql(self):
        # Read by SQLite from the host's clock, which every process shares.
        return "SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')"

    def is_lock_conflict(self, error):
        # Another writer held the lock for longer than the busy timeout.
        return "database is locked" in str(error)

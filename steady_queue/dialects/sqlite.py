"""SQLite: one writer at a time, so no row locks; DELETE ... RETURNING works."""

import os

from .base import Dialect


class SQLite(Dialect):
    vendor = "sqlite"
    serialises_writers = True

    def in_a_transaction(self, raw):
        return raw.in_transaction

    def location(self, settings):
        # A file on this host: its absolute path says which one.
        name = str(settings.get("NAME") or "")
        in_memory = not name or name == ":memory:" or "mode=memory" in name
        return {
            "host": None,
            "port": None,
            "name": name if in_memory else os.path.abspath(name),
        }

    def location_in_words(self, location):
        return location["name"]

    def lock_picked(self, cursor, table, key, pick_sql, params):
        # Picked by a write that changes nothing: a transaction that began by
        # reading fails at once ("database is locked") when it comes to write
        # after another writer committed; one that begins by writing waits
        # for the write lock, as the busy timeout allows, and holds it.
        return self.update_picked(
            cursor, table, key, f"{key} = {key}", [], pick_sql, params
        )

    def now_sql(self):
        # Read by SQLite from the host's clock, which every process shares.
        return "SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')"

    # The two below go into statements sent with parameters, where a "%"
    # is written "%%": Django's SQLite cursor reads %s in them, and with
    # DEBUG on its query log formats the whole statement with the
    # parameters, which a lone "%Y" breaks ("unsupported format character").
    def now_at_least_sql(self):
        # SQLite reads the clock to the millisecond: one more rounds it up.
        return "strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now', '+0.001 seconds')"

    def now_at_least_plus_sql(self, seconds_column):
        return (
            "strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now', "
            f"'+' || ({seconds_column} + 0.001) || ' seconds')"
        )

    def seconds_between_sql(self, start_column, end_column):
        # Django stores times as ISO text, which julianday() reads (in days,
        # to the millisecond).
        return f"(julianday({end_column}) - julianday({start_column})) * 86400.0"

    def is_lock_conflict(self, error):
        # Another writer held the lock for longer than the busy timeout.
        return "database is locked" in str(error)

"""DatabaseClock: the database server's time, read once per poll."""

import time
from datetime import timedelta


class DatabaseClock:
    """The database server's time, as every host sees it alike.

    ``sync()`` reads the server's clock (one query); ``now()`` carries that
    reading forward by this host's monotonic clock, so a host whose wall
    clock is off, or is stepped between two syncs, still agrees with the
    others on what time it is.
    """

    def __init__(self, queryset):
        self.queryset = queryset
        self.read_at = None
        self.read = None

    def sync(self):
        """Read the database server's time."""
        before = time.monotonic()
        read = self.queryset.database_now()
        after = time.monotonic()
        # The server read its clock during the round trip: say halfway.
        self.read_at = (before + after) / 2
        self.read = read

    def now(self):
        """The database server's time now (aware, UTC)."""
        if self.read is None:
            self.sync()
        return self.read + timedelta(seconds=time.monotonic() - self.read_at)

"""JobConnections: the database connection of the jobs a claiming thread runs."""

from django.db import connections


class JobConnections:
    """A connection of their own for the jobs run on the worker's claiming thread.

    Django keeps one connection per database alias and thread. The claiming
    thread's connection to the worker's database is the worker's own: its
    claims, marks and finishes. A job run on that thread must not share it:
    the runner closes a job's connections around each run as CONN_MAX_AGE
    says (with the default of 0, after every run), and a job may leave a
    transaction open or the connection broken. While such a job runs, the
    alias is given the jobs' own connection, which follows CONN_MAX_AGE as a
    pool thread's does; the worker's is put back when the run ends.

    Other aliases are the job's alone on that thread: the worker's loop uses
    only its own database there (the heartbeat and listener have threads).
    """

    def __init__(self, alias):
        self.alias = alias
        self._connection = None

    def lend(self):
        """Give the alias the jobs' connection; return the one it had, for
        ``take_back``."""
        own = connections[self.alias]
        if self._connection is None:
            self._connection = connections.create_connection(self.alias)
        connections[self.alias] = self._connection
        return own

    def take_back(self, own):
        """Give the alias back the connection ``lend`` returned."""
        connections[self.alias] = own

    def close(self):
        """Close the jobs' connection, if one was opened; on the claiming thread."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None

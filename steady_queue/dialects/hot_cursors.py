"""Cursors for our hot-path statements on PostgreSQL, kept per connection.

Each claim, mark and finish used to make a Django cursor around a new
psycopg cursor: Django's wrapper and the cursor's making cost a third of a
mark's CPU (docs/performance.rst). Where no one would see the difference, a
statement runs instead on a psycopg cursor kept for that connection, made
once as Django would make it, with Django's checks and its translation of
the driver's errors kept.

Someone sees the difference, and every statement goes through a Django
cursor as before, where: queries are captured (``DEBUG``,
``CaptureQueriesContext``, ``assertNumQueries``), an ``execute_wrapper`` is
installed, a tool replaced the connection's ``cursor`` (the debug toolbar),
Django's cursor wrapper is patched (an APM's instrumentation, before or
after this module was imported), or the backend makes or wraps cursors its
own way (``create_cursor``, ``make_cursor``, ``cursor`` ... overridden).
"""

import functools
import os

from django.db.backends import utils as django_utils
from django.db.backends.utils import CursorWrapper
from django.utils.asyncio import async_unsafe

# Where Django makes and wraps a connection's cursors: a backend of its own
# (django-prometheus's create_cursor, a subclass's make_cursor) or a tool
# (the debug toolbar's cursor, set on the connection) that replaces one of
# them sees every statement there, and must see ours.
CURSOR_MAKERS = (
    "cursor",
    "_cursor",
    "_prepare_cursor",
    "make_cursor",
    "make_debug_cursor",
    "create_cursor",
)
# The Django connection's attribute listing its kept cursors not in use (a
# pipeline holds several). Not a weak mapping by psycopg connection: a kept
# cursor refers to its connection, which would never be let go.
KEPT = "_steady_queue_kept_cursors"
_DJANGO_UTILS = os.path.normcase(django_utils.__file__)


def watched(connection, djangos):
    """Whether anyone would miss our statements from this Django
    connection's cursors (see the module's docstring); ``djangos``: Django's
    own wrapper class for the connection's database."""
    return (
        connection.queries_logged
        or bool(connection.execute_wrappers)
        or _patched(CursorWrapper.execute)
        or _makes_its_own_cursors(type(connection), djangos)
        or any(name in vars(connection) for name in CURSOR_MAKERS)
    )


@functools.cache
def _patched(execute):
    """Whether Django's cursor wrapper runs statements through someone's
    code (an APM's: Sentry, OpenTelemetry). Told by where the function was
    written, not by the one found at import: an APM set up in the settings
    has patched it by then."""
    code = getattr(execute, "__code__", None)
    return (
        code is None
        or hasattr(execute, "__wrapped__")
        or os.path.normcase(code.co_filename) != _DJANGO_UTILS
    )


@functools.cache
def _makes_its_own_cursors(backend, djangos):
    return any(
        getattr(backend, name) is not getattr(djangos, name) for name in CURSOR_MAKERS
    )


class HotCursor:
    """A kept psycopg cursor, running one statement at a time for one Django
    connection as Django's cursor wrapper would: its checks before, the
    driver's errors turned into Django's. Closed, it is kept for the
    connection's next statement."""

    __slots__ = ("connection", "cursor", "kept")

    def __init__(self, cursor, connection):
        self.cursor = cursor
        self.connection = connection
        # In the connection's free list: closed twice, it must not be
        # handed out twice (two statements of a pipeline on one cursor).
        self.kept = False

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def execute(self, sql, params=None):
        connection = self.connection
        connection.validate_no_broken_transaction()
        with connection.wrap_database_errors:
            self.cursor.execute(sql, params)

    @property
    def description(self):
        return self.cursor.description

    def fetchall(self):
        with self.connection.wrap_database_errors:
            return self.cursor.fetchall()

    def close(self):
        raw = self.cursor.connection
        if not self.kept and not raw.closed:
            self.kept = True
            kept_by(self.connection).append(self)


def kept_by(connection):
    """The cursors kept for this Django connection, not in use."""
    kept = connection.__dict__.get(KEPT)
    if kept is None:
        kept = connection.__dict__[KEPT] = []
    return kept


def connect(connection):
    """Connect as Django's cursor() does first (a failed health check
    closes the connection, to open a new one)."""
    connection.close_if_health_check_failed()
    connection.ensure_connection()


@async_unsafe
def take(connection, make):
    """A cursor for one of our statements on this Django connection, which
    is connected (``connect``) and nobody watches: a kept one if free, else
    made by ``make()`` (Django's create_cursor, as its own cursors are)."""
    connection.validate_thread_sharing()
    kept = kept_by(connection)
    while kept:
        hot = kept.pop()
        # Of a connection since closed (or handed back to Django's pool and
        # this one taken from it): left to go with it.
        if hot.cursor.connection is connection.connection:
            hot.kept = False
            return hot
    with connection.wrap_database_errors:
        return HotCursor(make(), connection)

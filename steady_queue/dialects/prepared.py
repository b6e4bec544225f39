"""Whether a PostgreSQL connection prepares our hot-path statements.

Django turns psycopg's prepared statements off unless a database's OPTIONS
set ``"prepare_threshold"``: behind a pooler in transaction mode (PgBouncer
before 1.21, or without ``max_prepared_statements``) each transaction may run
on another server connection, where a statement prepared on the first does
not exist. A connection that reaches the server itself has no such problem,
and there our claim, finish and enqueue are planned once per connection
instead of at every call.

Each backend alias says what its database may do
(``OPTIONS["prepared_statements"]``): ``True``, ``False``, or ``"auto"``, the
default: prepare where the connection reaches PostgreSQL directly. The
server is asked which port and address it was reached on, and they are
compared with what the client dialed: a pooler or proxy in between reached
the server on its own, and is left alone. A project's own
``"prepare_threshold"`` always wins.
"""

import os
import weakref

import django

AUTO = "auto"
# Before 6.1, Django's query capture (CaptureQueriesContext, the debug
# toolbar) records a prepared statement's SQL as None: psycopg keeps no query
# text for it, and only 6.1 falls back to the SQL it was given. "auto" leaves
# those versions as they were; True prepares there too.
AUTO_PREPARES = django.VERSION >= (6, 1)
# Set on a connection where we turned preparing on: anyone else's statements
# (prepare=None) are prepared after this many runs of the same text: never,
# as Django leaves them. Ours ask for it themselves (prepare_now).
OURS_ONLY = 2**31 - 1
# Statement texts of ours seen once on a connection we turned preparing on,
# at most this many (the hot path has a few dozen).
SEEN_AT_MOST = 1000
# Where the server was reached: its port, the address it was reached on (NULL
# over a Unix socket) and its socket folders. The folders are read from
# pg_settings, which leaves them out (NULL here) for a user without
# pg_read_all_settings, where current_setting() would raise and stop every
# enqueue and claim of an application's least-privileged user.
SERVER_END_SQL = (
    "SELECT current_setting('port'), host(inet_server_addr()),"
    " (SELECT setting FROM pg_settings WHERE name = 'unix_socket_directories')"
)

# "prepared statement ... does not exist" and "... already exists": a
# statement prepared on one server connection met another, behind a pooler.
POOLED_STATES = {"26000", "42P05"}
POOLED_HINT = (
    "a statement prepared on one server connection ran on another: a pooler "
    "in transaction mode is between this process and PostgreSQL. Set "
    "OPTIONS['prepared_statements'] to \"auto\" or False (or, on PgBouncer "
    "1.21 or later, its max_prepared_statements), and take prepare_threshold "
    "out of the database's OPTIONS"
)

# Database alias -> what its backend allows (choose); "auto" if none said.
_choices = {}
# Where a database alias's connections lead -> whether they reach the server
# itself: asked once a process, since a new connection takes the same path.
_direct = {}
# psycopg connection -> the texts of ours it has run once (prepare_now).
_seen = weakref.WeakKeyDictionary()


def choose(database, choice):
    """Record what a backend's ``prepared_statements`` allows on ``database``."""
    _choices[database] = choice


def allow_ours(connection):
    """Let this Django connection prepare our statements where its database's
    choice and its route allow; never change a project's own threshold."""
    raw = connection.connection
    if raw.prepare_threshold is not None:
        return  # the project's OPTIONS, or already decided on this connection
    if "prepare_threshold" in connection.settings_dict.get("OPTIONS", {}):
        return  # the project said None: nothing prepared, as it asks
    choice = _choices.get(connection.alias, AUTO)
    if choice is False:
        return
    if choice == AUTO and not (AUTO_PREPARES and reaches_the_server_itself(connection)):
        return
    raw.prepare_threshold = OURS_ONLY


def prepare_now(raw, query):
    """Whether this run of our statement ``query`` on psycopg connection
    ``raw`` should be prepared.

    Where the project set its own threshold, from the first run, as before.
    Where we turned preparing on, from the second: preparing costs a round
    trip of its own, which a connection that runs the statement once (a web
    request's enqueue under CONN_MAX_AGE 0) would never earn back.
    """
    if raw.prepare_threshold != OURS_ONLY:
        return True
    seen = _seen.setdefault(raw, set())
    if query in seen:
        return True
    if len(seen) >= SEEN_AT_MOST:
        seen.clear()
    seen.add(query)
    return False


def reaches_the_server_itself(connection):
    """Whether ``connection`` talks to PostgreSQL itself, not through a pooler
    or proxy (answered once per route and process)."""
    settings = connection.settings_dict
    route = (connection.alias, settings["HOST"], settings["PORT"], settings["NAME"])
    if route not in _direct:
        # On the driver's connection, not through Django's cursor: asked once a
        # process, it must not show in a test's count of the queries it made.
        connection.ensure_connection()
        raw = connection.connection
        with connection.wrap_database_errors:
            port, address, folders = raw.execute(SERVER_END_SQL).fetchone()
        _direct[route] = same_end(raw.info, port, address, folders)
    return _direct[route]


def same_end(info, port, address, folders):
    """Whether the client's end (psycopg's ``ConnectionInfo``) is the server's:
    the same port and, over TCP, the same address, or over a Unix socket, one
    of the server's socket folders (unknown, ``None``: not the same)."""
    if str(info.port) != port:
        return False
    if address is None:
        if folders is None:
            return False
        # One folder has several spellings (/var/run is /run on Debian, a
        # trailing slash): compared as the file system resolves them.
        sockets = {_resolved(folder) for folder in folders.split(",")}
        return not info.hostaddr and _resolved(info.host) in sockets
    return info.hostaddr == address


def _resolved(folder):
    return os.path.realpath(folder.strip()) if folder.strip() else ""


def pooler_hint(error):
    """What to do about ``error``, where it is a prepared statement that a
    pooler lost; else None."""
    cause = error.__cause__ or error
    return POOLED_HINT if getattr(cause, "sqlstate", None) in POOLED_STATES else None

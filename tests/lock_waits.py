"""Test helpers: which database session a thread uses, and whether it waits
for a row lock now (to hold one transaction open while another runs into it)."""

import threading

from django.db import connection, transaction

from steady_queue.models import Pause

from .helpers import scaled, wait_for

# How often to poll waits_for_a_lock(): MariaDB refreshes its InnoDB
# transaction views only when nobody read them for 0.1 s, so a tighter loop
# reads the same stale rows for ever.
LOCK_VIEW_REFRESH = 0.25
# The statements that write.
WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")


def session_id():
    """This thread's database session, as the lock views name it; None on
    SQLite, which has no sessions to look at (its writers wait in turn)."""
    if connection.vendor == "sqlite":
        return None
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT pg_backend_pid()")
        else:
            cursor.execute("SELECT CONNECTION_ID()")
        return cursor.fetchone()[0]


def waits_for_a_lock(session):
    """Whether a database session (PostgreSQL, MariaDB) waits for a row lock
    right now."""
    if session is None:
        return False
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE pid = %s AND NOT granted)",
                [session],
            )
            return cursor.fetchone()[0]
        cursor.execute(
            "SELECT COUNT(*) FROM information_schema.innodb_trx "
            "WHERE trx_mysql_thread_id = %s AND trx_state = 'LOCK WAIT'",
            [session],
        )
        return cursor.fetchone()[0] > 0


class OtherSession:
    """``work()`` run in a thread of its own, on its own database connection,
    to meet a transaction the test holds open: its session id, what it
    returned or raised, and whether it began and ended."""

    def __init__(self, work):
        self.work = work
        self.session = self.value = self.error = None
        self.started, self.finished = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._run)

    def start(self):
        self.thread.start()
        return self

    def waits_for_a_lock(self):
        """Whether its session waits for a row lock now (never on SQLite)."""
        return waits_for_a_lock(self.session)

    def join(self, timeout):
        """Wait for it to end (its ``value`` or ``error`` is then set)."""
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the other session did not end"

    def _run(self):
        try:
            self.session = session_id()
            self.started.set()
            self.value = self.work()
        except Exception as error:
            self.error = error
        finally:
            self.finished.set()
            connection.close()


def beside_a_writer(operate):
    """Run ``operate()`` in another thread while this one holds a write
    transaction open; commit once it sends its first write to our tables
    (after whatever it read in its transaction), then let it end; return
    what it raised, or None."""
    writing = threading.Event()

    def note_writes(execute, sql, params, many, context):
        statement = sql.lstrip().upper()
        if statement.startswith(WRITES) and "STEADY_QUEUE_" in statement:
            writing.set()
        return execute(sql, params, many, context)

    def run():
        with connection.execute_wrapper(note_writes):
            operate()

    other = OtherSession(run)
    with transaction.atomic():
        Pause.objects.pause("elsewhere")  # another writer, holding its lock
        other.start()
        wait_for(
            lambda: writing.is_set() or other.finished.is_set(),
            message="the operation sending its first write",
        )
    other.join(timeout=scaled(30))
    return other.error

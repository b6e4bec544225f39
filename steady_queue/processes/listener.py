"""ReadyListener: wakes a worker the moment PostgreSQL announces ready jobs."""

import logging
import secrets
import threading
import time

from django.db import connections

from ..dialects import dialect_for
from ..models.base import READY_CHANNEL
from .db import MAX_BACKOFF, QuietRepeats, backoff_after
from .interruptible import Interruptible
from .thread_signals import leave_signals_to_the_main_thread

logger = logging.getLogger("steady_queue")

# Django's connection parameters that belong to its own connections (cursor
# class, adapters, prepared statements); every other one (sslrootcert, passfile,
# service, connect_timeout, ...) is a libpq setting the LISTEN connection needs.
DJANGO_ONLY_KEYS = {"cursor_factory", "context", "prepare_threshold"}

# How long a new LISTEN may take to hear the NOTIFY it sends itself before the
# worker says that nothing reaches it. Delivered at once when it works; not a
# wait on anything else (the listener's own thread waits).
PROBE_DEADLINE = 5.0
PROBE_SQL = "SELECT pg_notify(%s, %s)"

NOT_HEARD = (
    "%s: LISTEN on database %r did not hear its own NOTIFY within %g s, so new "
    "jobs are found only at each poll (polling_interval), not at once. The "
    "likely cause is a transaction pooler (PgBouncer in transaction mode) "
    "between the worker and PostgreSQL: a LISTEN through one hears nothing. "
    "Set the option listen_database to a DATABASES alias that reaches "
    'PostgreSQL directly (see "Behind PgBouncer" on the Deployment page '
    "of the steady_queue documentation), or listen_notify to False."
)


def listen_connect_params(database):
    """psycopg.connect() keywords for a LISTEN connection to a Django database."""
    params = connections[database].get_connection_params()
    return {key: value for key, value in params.items() if key not in DJANGO_ONLY_KEYS}


class ReadyListener(Interruptible):
    """LISTENs on its own connection and calls ``on_ready`` for each notification
    of new ready jobs of its backend alias (``None``: of any alias).

    Each notification names the alias its jobs were enqueued through, so a
    busy alias sharing the database does not wake this one's idle workers for
    claims that would find nothing. Polling stays on as the fallback: while
    this connection is down (or when the option ``listen_notify`` is off) a
    worker still finds jobs at its next poll.

    Once listening, it sends a NOTIFY of its own through ``notify_database``
    (where enqueues send theirs) and logs a warning once if it does not hear
    it: a LISTEN behind a transaction pooler hears nothing, silently.
    """

    def __init__(
        self,
        database,
        on_ready,
        name="listener",
        backend_name=None,
        notify_database=None,
    ):
        super().__init__()
        self.database = database
        self.on_ready = on_ready
        self.name = name
        self.backend_name = backend_name
        self.notify_database = notify_database or database
        # A payload no alias has, and no other listener's probe.
        self.probe = f"probe:{name}:{secrets.token_hex(4)}"
        self.probe_sent = False
        self.probe_due = None  # monotonic deadline while the probe is unheard
        self._stopped = threading.Event()
        self._thread = None

    @classmethod
    def is_supported(cls, database):
        return dialect_for(connections[database]).announces_ready_jobs

    def start(self):
        self._thread = threading.Thread(
            target=self._run, name=f"{self.name}-listener", daemon=True
        )
        self._thread.start()

    def stop(self):
        """End the thread now, whether it waits for a notification or to reconnect."""
        self._stopped.set()
        self.wake_up()
        if self._thread is not None:
            self._thread.join(timeout=3)
            if self._thread.is_alive():
                # Still selecting on the pipe: closing it could hand its number
                # to a new socket under that select(). The daemon thread keeps it.
                return
        self.close_wake_pipe()

    def _run(self):
        leave_signals_to_the_main_thread()
        failures = 0
        warnings = QuietRepeats()
        while not self._stopped.is_set():
            try:
                self._listen()
                failures = 0
            except Exception as error:
                failures += 1
                delay = backoff_after(failures)
                left_out = warnings.note(capped=delay >= MAX_BACKOFF)
                if left_out is not None:
                    logger.warning(
                        "%s: LISTEN connection to database %r lost (%s); polling "
                        "meanwhile, reconnecting in %.1fs%s",
                        self.name,
                        self.database,
                        str(error).strip().splitlines()[0]
                        if str(error).strip()
                        else error,
                        delay,
                        left_out,
                    )
                self.interruptible_sleep(delay)

    def _listen(self):
        import psycopg

        connect = listen_connect_params(self.database)
        with psycopg.connect(**connect, autocommit=True) as connection:
            connection.execute(f"LISTEN {READY_CHANNEL}")
            # Jobs may have become ready while no one listened.
            self.on_ready()
            if not self.probe_sent:
                self.send_probe()
            # One select() on the socket and the wake-up pipe: stop() ends the
            # wait at once. A stop flag checked between timed waits held the
            # stop up to the wait's length (a second, on every worker's
            # shutdown), and stop() closing the connection would race the
            # select() in this thread (the closed socket's number can be
            # reused at once). A wake-up written before the select() starts
            # stays in the pipe, so a stop between the check and the wait
            # is not lost.
            while not self._stopped.is_set():
                if self.wait_readable(connection.fileno(), self._until_probe_due()):
                    self._receive(connection.pgconn)
                self._give_up_on_probe_when_due()

    def send_probe(self):
        """NOTIFY this listener's probe through the database enqueues use."""
        import psycopg

        try:
            connect = listen_connect_params(self.notify_database)
            with psycopg.connect(**connect, autocommit=True) as connection:
                connection.execute(PROBE_SQL, (READY_CHANNEL, self.probe))
        except Exception as error:
            # Nothing learnt: tried again at the next connection.
            logger.debug("%s: could not send a probe NOTIFY: %s", self.name, error)
            return
        self.probe_sent = True
        self.probe_due = time.monotonic() + PROBE_DEADLINE

    def _until_probe_due(self):
        if self.probe_due is None:
            return None
        return max(0.0, self.probe_due - time.monotonic())

    def _give_up_on_probe_when_due(self):
        if self.probe_due is not None and time.monotonic() >= self.probe_due:
            self.probe_due = None
            logger.warning(NOT_HEARD, self.name, self.database, PROBE_DEADLINE)

    def _heard_probe(self):
        if self.probe_due is not None:
            self.probe_due = None
            logger.debug(
                "%s: LISTEN on database %r heard its own NOTIFY",
                self.name,
                self.database,
            )

    def _receive(self, pgconn):
        """Read what the server sent; call ``on_ready`` once if it notified this
        listener's alias.

        A closed connection raises here (consume_input fails), and _run()
        reconnects.
        """
        pgconn.consume_input()
        notified = False
        while (notice := pgconn.notifies()) is not None:
            payload = notice.extra.decode()
            if payload == self.probe:
                self._heard_probe()
                continue
            notified = notified or self.concerns(payload)
        if notified:
            self.on_ready()

    def concerns(self, payload):
        """Whether a notification's payload (an alias) is for this listener."""
        return self.backend_name is None or payload == self.backend_name

"""ReadyListener: wakes a worker the moment PostgreSQL announces ready jobs."""

import logging
import threading

from django.db import connections

from ..dialects import dialect_for
from ..models.base import READY_CHANNEL

logger = logging.getLogger("steady_queue")

# Django's connection parameters that belong to its own connections (cursor
# class, adapters, prepared statements); every other one (sslrootcert, passfile,
# service, connect_timeout, ...) is a libpq setting the LISTEN connection needs.
DJANGO_ONLY_KEYS = {"cursor_factory", "context", "prepare_threshold"}


def listen_connect_params(database):
    """psycopg.connect() keywords for a LISTEN connection to a Django database."""
    params = connections[database].get_connection_params()
    return {key: value for key, value in params.items() if key not in DJANGO_ONLY_KEYS}


class ReadyListener:
    """LISTENs on its own connection and calls ``on_ready`` for each notification.

    Polling stays on as the fallback: while this connection is down (or when the
    option ``listen_notify`` is off) a worker still finds jobs at its next poll.
    """

    def __init__(self, database, on_ready, name="listener"):
        self.database = database
        self.on_ready = on_ready
        self.name = name
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
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(timeout=3)

    def _run(self):
        failures = 0
        while not self._stopped.is_set():
            try:
                self._listen()
                failures = 0
            except Exception as error:
                failures += 1
                delay = min(30.0, 0.5 * 2 ** min(failures - 1, 6))
                logger.warning(
                    "%s: LISTEN connection lost (%s); polling meanwhile, "
                    "reconnecting in %.1fs",
                    self.name,
                    str(error).strip().splitlines()[0] if str(error).strip() else error,
                    delay,
                )
                self._stopped.wait(delay)

    def _listen(self):
        import psycopg

        connect = listen_connect_params(self.database)
        with psycopg.connect(**connect, autocommit=True) as connection:
            connection.execute(f"LISTEN {READY_CHANNEL}")
            # Jobs may have become ready while no one listened.
            self.on_ready()
            while not self._stopped.is_set():
                for _ in connection.notifies(timeout=1.0, stop_after=1):
                    self.on_ready()

"""The heartbeat thread that keeps a process row alive."""

import logging
import threading

from django.db import connections

logger = logging.getLogger("steady_queue")


class Heartbeat:
    """Beats every ``interval`` seconds; tells its owner to stop if its row is gone."""

    def __init__(self, owner, interval):
        self.owner = owner
        self.interval = interval
        self._stopped = threading.Event()
        self._thread = None

    def start(self):
        self._thread = threading.Thread(
            target=self._run, name=f"{self.owner.name}-heartbeat", daemon=True
        )
        self._thread.start()

    def stop(self):
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self):
        while not self._stopped.wait(self.interval):
            self.beat()

    def beat(self):
        ok, alive = self.owner.guard.call(self.owner.process.heartbeat)
        # Beats are rare: hold no connection open between them.
        connections[self.owner.database].close()
        if ok and not alive and not self.owner.stopping:
            logger.warning(
                "%s: its process row is gone (pruned?); stopping",
                self.owner.description,
            )
            self.owner.stop()

"""The heartbeat thread that keeps a process row alive."""

import logging
import threading

from .db import DatabaseGuard, close_quietly
from .thread_signals import leave_signals_to_the_main_thread

logger = logging.getLogger("steady_queue")


class Heartbeat:
    """Beats every ``interval`` seconds; tells its owner to stop if its row is gone."""

    def __init__(self, owner, interval):
        self.owner = owner
        self.interval = interval
        # Its own guard: this thread's successes must not reset the failure
        # count, and so the backoff, of the owner's loop during an outage.
        self.guard = DatabaseGuard(owner.database, f"{owner.description} heartbeat")
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
        leave_signals_to_the_main_thread()
        while not self._stopped.wait(self.interval):
            try:
                self.beat()
            except Exception:
                # A dead heartbeat thread gets a live process pruned: keep beating.
                logger.exception("%s: heartbeat failed", self.owner.description)

    def beat(self):
        stuck = self.owner.stuck_for()
        if stuck > self.owner.options.process_alive_threshold:
            # Wedged: beating on would keep its claims held for ever. Silent,
            # it is killed and replaced by its supervisor (fork mode), or its
            # supervisor's liveness file goes stale (thread mode).
            logger.error(
                "%s: its main loop has been stuck for %.0f s; not heartbeating",
                self.owner.description,
                stuck,
            )
            return
        ok, alive = self.guard.call(self.owner.process.heartbeat)
        # Beats are rare: hold no connection open between them.
        close_quietly(self.owner.database)
        if ok and not alive and not self.owner.stopping:
            logger.warning(
                "%s: its process row is gone (pruned?); stopping",
                self.owner.description,
            )
            self.owner.stop()

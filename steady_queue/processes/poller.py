"""Poller: a process whose run loop is poll(), then sleep for what it returned."""

import logging
import time

from .base import Runnable

logger = logging.getLogger("steady_queue")

# A forked child looks at least this often whether its supervisor still lives,
# however long poll() asked to sleep (a full pool, a database backoff).
SUPERVISOR_CHECK_INTERVAL = 1.0


class Poller(Runnable):
    """Loops ``delay = poll(); interruptible_sleep(delay)`` until stopped."""

    polling_interval = 1.0

    def run(self):
        while not self.stopping:
            delay = self.turn()
            if delay is None:
                break
            self.pause(delay)

    def turn(self):
        """One round of the loop: a poll, unless the supervisor is gone.
        Return how long to sleep before the next, or None to stop."""
        self.came_round()
        if self.supervisor_went_away():
            logger.warning("%s: its supervisor is gone; stopping", self.description)
            self.stop()
            return None
        _, delay = self.guard.call(self.poll)
        return delay

    def pause(self, seconds):
        """Sleep until woken or ``seconds`` pass, checking on the supervisor."""
        if self.supervisor_pid is None:
            self.interruptible_sleep(seconds)
            return
        deadline = time.monotonic() + seconds
        while not self.stopping and not self.supervisor_went_away():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            if self.interruptible_sleep(min(remaining, SUPERVISOR_CHECK_INTERVAL)):
                return

    def poll(self):
        """Do one round of work; return how long to sleep before the next."""
        raise NotImplementedError

"""Poller: a process whose run loop is poll(), then sleep for what it returned."""

import logging

from .base import Runnable

logger = logging.getLogger("steady_queue")


class Poller(Runnable):
    """Loops ``delay = poll(); interruptible_sleep(delay)`` until stopped."""

    polling_interval = 1.0

    def run(self):
        while not self.stopping:
            if self.supervisor_went_away():
                logger.warning("%s: its supervisor is gone; stopping", self.description)
                self.stop()
                break
            _, delay = self.guard.call(self.poll)
            self.interruptible_sleep(delay)

    def poll(self):
        """Do one round of work; return how long to sleep before the next."""
        raise NotImplementedError

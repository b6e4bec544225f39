"""LivenessFile: a file whose modification time says the supervisor is alive.

A container's liveness probe reads it without a database query
(``manage.py steady_queue health --liveness-file PATH``, or ``find``).
"""

import logging
import os
import time

logger = logging.getLogger("steady_queue")


class LivenessFile:
    """Touched by a supervisor at each heartbeat that succeeded."""

    def __init__(self, path):
        self.path = path
        self.failing = False

    def touch(self):
        """Set the file's time to now, creating it; a failure is logged once
        (until a touch works again), never raised: a probe will notice."""
        try:
            descriptor = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                os.utime(descriptor)
            finally:
                os.close(descriptor)
        except OSError as error:
            if not self.failing:
                logger.error("Cannot touch the liveness file %s: %s", self.path, error)
            self.failing = True
            return
        self.failing = False


def seconds_since_touched(path):
    """Seconds since ``path`` was last touched, or None if there is no such file."""
    try:
        touched = os.stat(path).st_mtime
    except FileNotFoundError:
        return None
    return max(0.0, time.time() - touched)

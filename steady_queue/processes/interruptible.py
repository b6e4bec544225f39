"""A sleep that a signal handler or another thread can cut short."""

import os
import select


class Interruptible:
    """Self-pipe: ``wake_up()`` ends the current or next ``interruptible_sleep()``."""

    def __init__(self):
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)

    def wake_up(self):
        """Safe from signal handlers and any thread."""
        try:
            os.write(self._wake_write, b".")
        except (BlockingIOError, OSError):
            pass  # The pipe is full (a wake-up is already pending) or closed.

    def interruptible_sleep(self, seconds):
        if seconds > 0:
            try:
                select.select([self._wake_read], [], [], seconds)
            except InterruptedError:
                pass
        self._drain()

    def _drain(self):
        try:
            while os.read(self._wake_read, 512):
                pass
        except (BlockingIOError, OSError):
            pass

    def close_wake_pipe(self):
        for fd in (self._wake_read, self._wake_write):
            try:
                os.close(fd)
            except OSError:
                pass

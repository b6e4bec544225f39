"""A sleep that a signal handler or another thread can cut short."""

import os
import select
import threading
import time


class Interruptible:
    """Self-pipe: ``wake_up()`` ends the current or next ``interruptible_sleep()``."""

    def __init__(self):
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)
        # Guards the write end against close_wake_pipe(): a pool thread finishing
        # a job late must never write into a closed descriptor, whose number may
        # by then belong to a database socket. Reentrant, because a signal
        # handler may wake the main thread while it holds the lock.
        self._wake_lock = threading.RLock()
        # Whether a byte waits in the pipe: a wake-up already pending needs
        # no other write (a worker is woken twice per finished job).
        self._wake_pending = False
        # Other descriptors whose input ends a sleep as a wake-up does (a
        # worker's doorbell): objects with fileno() and drain().
        self._wake_sources = []

    def wake_also_on(self, source):
        """Let input on ``source`` end sleeps too; it is drained when it does."""
        self._wake_sources.append(source)

    def stop_waking_on(self, source):
        if source in self._wake_sources:
            self._wake_sources.remove(source)

    def wake_up(self):
        """Safe from signal handlers and any thread, also after the pipe closed."""
        with self._wake_lock:
            if self._wake_write is None or self._wake_pending:
                return
            self._wake_pending = True
            try:
                os.write(self._wake_write, b".")
            except (BlockingIOError, OSError):
                pass  # The pipe is full: a wake-up is already pending.

    def interruptible_sleep(self, seconds):
        """Sleep up to ``seconds``; return True if a wake-up ended it early."""
        woken = False
        if self._wake_read is None:
            time.sleep(max(seconds, 0))
            return False
        if seconds > 0:
            sources = {source.fileno(): source for source in self._wake_sources}
            try:
                readable = select.select([self._wake_read, *sources], [], [], seconds)
                readable = readable[0]
            except InterruptedError:
                readable, woken = [], True
            for fileno in readable:
                woken = True
                if fileno in sources:
                    sources[fileno].drain()
            return self._drain(self._wake_read in readable) or woken
        return self._drain()

    def wait_readable(self, fileno, timeout=None):
        """Wait until ``fileno`` has input (True), or a wake-up comes or
        ``timeout`` seconds pass (False)."""
        if self._wake_read is None:
            return False
        try:
            readable = select.select([fileno, self._wake_read], [], [], timeout)[0]
        except InterruptedError:
            readable = []
        return not self._drain(self._wake_read in readable) and fileno in readable

    def _drain(self, readable=False):
        """Consume pending wake-ups; return whether there were any.

        ``readable``: select() saw a byte in the pipe. It is read even if the
        flag says none is pending: a wake-up that set the flag, then lost the
        race to a drain before its write, leaves its byte behind a cleared
        flag, and a byte never read would end every later sleep at once.
        """
        if not (self._wake_pending or readable):
            return False
        drained = False
        try:
            while os.read(self._wake_read, 512):
                drained = True
        except (BlockingIOError, OSError):
            pass
        # Cleared after the read, not before: a wake-up skipped in between
        # came from a change made before it, which whoever drained (about to
        # act, woken) sees; one cleared first could leave a byte unread
        # behind a flag saying none is.
        self._wake_pending = False
        return drained

    def close_wake_pipe(self):
        """Close the pipe; later wake-ups do nothing. Idempotent."""
        with self._wake_lock:
            fds = (self._wake_read, self._wake_write)
            self._wake_read = self._wake_write = None
            for fd in fds:
                if fd is not None:
                    try:
                        os.close(fd)
                    except OSError:
                        pass

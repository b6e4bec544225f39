"""Relief: a worker's loop goes on while its claiming thread runs a job that
turned out long."""

import itertools
import logging
import threading
import time
from contextlib import contextmanager

from .thread_signals import leave_signals_to_the_main_thread

logger = logging.getLogger("steady_queue")

# How long a job may hold up the claiming thread before Relief takes over the
# loop: a few of the short runs it was judged by (processes/short_jobs.py).
RELIEF_AFTER = 0.05
# While no job runs on the claiming thread, Relief sleeps until one starts,
# and wakes this often all the same: an idle worker wakes no more for it.
IDLE_WAIT = 1.0


class Relief:
    """A thread that takes over the worker's loop while the claiming thread
    runs a job that has gone on for ``after`` seconds.

    A worker runs the jobs of short tasks on the thread that claimed them
    (ShortJobs). A task short in its past runs may still run long this time
    (a slow query, a network timeout). Held up there, the claiming thread
    would claim nothing for the idle pool threads, record none of their
    outcomes and act on no timeout, cancellation or stop, and the heartbeat
    would stop once the loop looked stuck. Relief polls in its place, handing
    every job to the pool, until the run ends.

    Only one thread polls at a time: the loop's role is a lock, which the
    claiming thread gives up for the length of each run on it, and Relief
    holds for the length of each poll. Taking the role back, the claiming
    thread waits for a poll of Relief's to end, and learns from ``turns``
    whether Relief polled: the worker's state changed under the run, and what
    it was doing before the run must be looked at afresh.

    Should the worker stop (a signal, a recycle) while the run goes on, the
    claiming thread cannot get to its shutdown: ``on_stop`` is called on this
    thread, with the role held, and ends the process.
    """

    def __init__(self, poll, on_stop, *, name, after=RELIEF_AFTER):
        self.poll = poll
        self.on_stop = on_stop
        self.after = after
        self.name = name
        self.role = threading.Lock()
        # Polls made by Relief; read by the claiming thread after each run.
        self.turns = 0
        # (number, time.monotonic() it began) of the run on the claiming
        # thread, or None. One store, read by Relief without the lock.
        self._run = None
        self._numbers = itertools.count()
        self._stopped = threading.Event()
        # Ends Relief's pause between polls: set at stop, and when the
        # claiming thread takes the role back after Relief polled.
        self._wake = threading.Event()
        # Ends Relief's idle sleep: set as a run starts while it is idle.
        self._idle = False
        self._started = threading.Event()
        self._thread = None

    def start(self):
        self._thread = threading.Thread(
            target=self._serve, name=f"{self.name}-relief", daemon=True
        )
        self._thread.start()

    def stop(self):
        self._stopped.set()
        self._wake.set()
        self._started.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    @contextmanager
    def running(self):
        """Around a job run on the claiming thread: Relief may poll meanwhile.

        Yields a callable that says, once the block has ended, whether it did.
        """
        turns = self.run_begins()
        try:
            yield lambda: self.turns != turns
        finally:
            self.run_ended(turns)

    def run_begins(self):
        """A run on the claiming thread begins: Relief may poll from
        ``after`` on. Returns what ``run_ended`` is given."""
        turns = self.turns
        self._run = (next(self._numbers), time.monotonic())
        if self._idle:
            # Said once: until Relief has the GIL to wake, every run here
            # would set the event again (a fiftieth of a no-op job's CPU).
            self._idle = False
            self._started.set()
        return turns

    def run_ended(self, turns):
        """The run begun when Relief had polled ``turns`` times has ended;
        returns with the loop's role back on the claiming thread."""
        # Waits for a poll of Relief's to end: one poller at a time.
        with self.role:
            self._run = None
        if self.turns != turns:
            self._wake.set()

    def nudge(self):
        """Something changed for the loop (a pool thread freed up): while
        Relief polls in the claiming thread's place, its next poll comes now
        rather than at the end of its pause. Otherwise the next pause is
        cleared before it begins: a nudge costs nothing then."""
        self._wake.set()

    def _serve(self):
        leave_signals_to_the_main_thread()
        relieved = None
        while not self._stopped.is_set():
            run = self._run
            if run is None:
                self.sleep_until_a_run_starts()
                continue
            due = run[1] + self.after - time.monotonic()
            if due > 0:
                self._stopped.wait(due)
                continue
            with self.role:
                if self._run is not run:
                    continue  # it ended while we waited for the role
                if relieved is not run:
                    relieved = run
                    logger.info(
                        "%s: a job has held its claiming thread for %.0f ms; "
                        "polling on beside it",
                        self.name,
                        (time.monotonic() - run[1]) * 1000,
                    )
                self.turns += 1
                # Cleared before the poll: a nudge while it polls (a thread
                # freed after it looked) ends the pause that follows.
                self._wake.clear()
                delay = self.poll()
                if delay is None:
                    self.on_stop()
                    return
            # Not the worker's own sleep, whose wake-ups are the claiming
            # thread's once it is back: at most ``after``, so that outcomes
            # of the pool's threads wait no longer than that meanwhile; a
            # freed pool thread (nudge) ends it at once.
            self._wake.wait(min(delay, self.after))

    def sleep_until_a_run_starts(self):
        # Idle is said before _run is looked at again, and run_begins() sets
        # _run before it looks at idle: one of the two sees the other, so a
        # run that starts now is never slept through. Cleared by the run
        # that sets _started, only this thread says idle again.
        self._idle = True
        if self._run is None and not self._stopped.is_set():
            self._started.wait(IDLE_WAIT)
        self._started.clear()
        self._idle = False

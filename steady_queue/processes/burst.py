"""Burst: run the jobs that are due, in this process, then return.

Behind ``start --once`` and ``start --max-tasks`` on the command line, and
``steady_queue.testing.run_pending`` in users' test suites. The jobs go the
production path: the same claim, runner, outcome recording, retries,
concurrency limits and signals; only the supervisor and the forks are left out.
"""

import logging
import signal
import threading
import time
from dataclasses import replace

from django.db import DatabaseError

from ..models import BlockedExecution, JobTally, ScheduledExecution, Wait
from ..models.admission import RATE
from .db import close_quietly
from .dispatcher import Dispatcher
from .interruptible import Interruptible
from .recycling import Recycler
from .worker import Worker

logger = logging.getLogger("steady_queue")


class InlinePool:
    """A pool of one that runs each job at once, in the calling thread.

    For test suites: the job sees the caller's database connection, and so the
    rows of a test's open transaction. No timeout can interrupt it. A job that
    raised a BaseException that is no Exception (KeyboardInterrupt, SystemExit)
    is recorded as failed, as a worker records it, and the exception is kept
    for the Burst to raise again: Ctrl-C in a test run stops it.
    """

    size = 1

    def __init__(self, on_done):
        self.on_done = on_done
        self.interruption = None

    @property
    def idle_threads(self):
        # Interrupted: the jobs claimed ahead stay unstarted, handed back.
        return 0 if self.interruption is not None else 1

    def start(self):
        pass

    def stop(self):
        pass

    def post(self, function):
        self.finished(function())

    def post_coroutine(self, coroutine_function):
        import asyncio

        self.finished(asyncio.run(coroutine_function()))

    def finished(self, outcome):
        self.on_done(outcome)
        if isinstance(outcome.exception, BaseException) and not isinstance(
            outcome.exception, Exception
        ):
            self.interruption = outcome.exception

    def raise_interruption(self):
        """Raise again what a job was interrupted by, once its outcome is queued."""
        interruption, self.interruption = self.interruption, None
        if interruption is not None:
            raise interruption


class Burst(Interruptible):
    """Runs due jobs through one Worker per configured worker entry.

    Each round dispatches every scheduled job that is due (and the jobs whose
    rate window has opened), then lets each
    worker claim and run until it is idle. ``until_idle`` ends the burst after
    a round that found nothing to do (``--once``); otherwise it waits for new
    jobs until ``max_tasks`` have run or it is stopped (``--max-tasks``).
    ``inline`` runs every job in the calling thread (test suites);
    ``run_scheduled`` runs scheduled jobs (a future ``run_after``, a retry's
    wait) without waiting for their time, and jobs waiting on a rate window
    past their rate; not a job parked by wait_for_event() or durable_sleep(),
    which waits for its event or its time.
    """

    def __init__(
        self,
        backend,
        worker_configs,
        *,
        max_tasks=None,
        until_idle=True,
        inline=False,
        run_scheduled=False,
    ):
        super().__init__()
        self.backend = backend
        self.max_tasks = max_tasks
        self.until_idle = until_idle
        self.inline = inline
        self.run_scheduled = run_scheduled
        self.stopping = False
        self.ran = 0
        self.workers = [
            Worker(backend, replace(config, max_tasks=None, max_memory_mb=None))
            for config in worker_configs
        ]
        self.dispatcher = Dispatcher(backend, backend.config.dispatchers[0])

    def start(self):
        """Boot, run until done, shut down; return how many jobs ran."""
        self.boot()
        try:
            self.run()
        finally:
            self.shutdown()
        return self.ran

    def boot(self):
        if threading.current_thread() is threading.main_thread() and not self.inline:
            signal.signal(signal.SIGTERM, lambda *_: self.stop())
            signal.signal(signal.SIGINT, lambda *_: self.stop())
        for worker in self.workers:
            if self.inline:
                worker.pool = InlinePool(worker.completed)
                # The caller's connection is the test's: leave it open.
                worker.runner.manage_connections = False
            worker.pool.start()
            # Claims are made only for a registered process (see claim()).
            worker.register()
            if not self.inline:
                worker.heartbeat.start()

    def run(self):
        while not self.stopping and not self.budget_spent:
            dispatched = self.dispatch_due()
            claimed = sum(self.drain(worker) for worker in self.workers)
            if dispatched or claimed:
                continue
            if self.until_idle:
                return
            self.interruptible_sleep(self.workers[0].polling_interval)

    def shutdown(self):
        for worker in self.workers:
            worker.immediate = self.stopping and not self.inline
            worker.stop_working()
            worker.heartbeat.stop()
            worker.deregister()
            worker.close_wake_pipe()
        self.dispatcher.close_wake_pipe()
        self.close_wake_pipe()
        if not self.inline:
            # No supervisor rolls up what this burst's finishes counted.
            self.roll_up_tallies()
            # Run from a thread of its own, this burst's connections end with it.
            close_quietly()

    def roll_up_tallies(self):
        """Add the run counts this burst inserted to the metrics' tallies;
        they count as they are until a later roll-up, should this fail."""
        try:
            JobTally.objects.using(self.backend.database).roll_up_all()
        except DatabaseError:
            logger.warning("could not roll up the run tallies", exc_info=True)

    def stop(self):
        """Finish the jobs running now, claim nothing more; from signal handlers."""
        self.stopping = True
        for worker in self.workers:
            worker.wake_up()
        self.wake_up()

    @property
    def budget_spent(self):
        return self.max_tasks is not None and self.ran >= self.max_tasks

    def dispatch_due(self):
        """Make every scheduled job that is due (or, with ``run_scheduled``,
        every one) ready; return how many moved."""
        scheduled = ScheduledExecution.objects.using(self.backend.database)
        blocked = BlockedExecution.objects.using(self.backend.database)
        if self.run_scheduled:
            # Every scheduled job, due or not, through its limits; and every
            # job waiting for room in a rate window, past its rate.
            waiting = blocked.filter(waits_for=RATE)
            # Not a parked job before its time: it would only park again (a
            # wait for an event, a durable sleep), for ever.
            parked = Wait.objects.using(self.backend.database).values("job_id")
            moved = scheduled.exclude(job_id__in=parked).make_ready_now()
            moved += scheduled.due().filter(job_id__in=parked).make_ready_now()
            return len(moved) + len(waiting.make_ready_now())
        batch_size = self.dispatcher.config.batch_size
        moved = total = scheduled.dispatch_next_batch(batch_size)
        while moved == batch_size:
            moved = scheduled.dispatch_next_batch(batch_size)
            total += moved
        return total + len(blocked.release_due_rates()[0])

    def pool_settled(self, worker, timeout=1.0):
        """Wait until every pool thread counts itself free; True if none does
        in time (a thread abandoned past its timeout stays busy).

        A thread hands over its outcome before it counts itself free: in that
        gap the worker has nothing in flight yet sees no idle thread, claims
        nothing, and would end the burst with ready jobs left.
        """
        deadline = time.monotonic() + timeout
        while worker.pool.idle_threads < worker.pool.size:
            if time.monotonic() >= deadline:
                return True
            worker.interruptible_sleep(0.005)
        return False

    def drain(self, worker):
        """Let one worker claim and run until it is idle; return how many it took."""
        taken = 0
        while True:
            # This loop is the worker's main loop here (its heartbeat looks).
            worker.came_round()
            remaining = None if self.max_tasks is None else self.max_tasks - self.ran
            if remaining == 0:
                # What still runs is recorded by shutdown's stop_working().
                return taken
            # A fresh count per poll, capped at the budget left: the worker
            # claims no more than that, and never asks to be recycled.
            worker.recycler = Recycler(
                replace(worker.config, max_tasks=remaining), measure_memory=False
            )
            delay = worker.poll()
            if self.inline:
                # Out of run(): shutdown() records the job's outcome on the way.
                worker.pool.raise_interruption()
            claimed = worker.recycler.claimed
            taken += claimed
            self.ran += claimed
            if claimed == 0 and not worker.in_flight:
                if worker.pool.idle_threads >= worker.pool.size or self.pool_settled(
                    worker
                ):
                    return taken
                continue  # the pool is free now: claim what it could not take
            if claimed == 0:
                # Running on pool threads: woken when one frees up.
                worker.interruptible_sleep(min(delay, 0.05) or 0.05)

"""StateRunner: advances the rows of StatorModels through their state graphs.

Any number of runners coexist: each leases the rows it takes (SKIP LOCKED, and
a lease time after which any runner may take them again), so nothing has to be
replayed when runners die. A handler's effects may therefore happen twice, if
its runner dies (or its lease runs out) before the outcome is written: handlers
are run at least once per entry into their state.

A handler past its state's timeout cannot be interrupted (a thread cannot be
killed): as a worker does with a job past its timeout, the runner records the
try as failed at once, leases nothing more, lets its other handlers finish,
and exits to be replaced, which in fork mode ends the stuck thread with the
process. A coroutine handler (``async def``) runs on the pool's event loop
instead, and is cancelled at its timeout, a failed try like any other; only
if the loop itself is blocked does the sentinel step in, as for a thread.
"""

import asyncio
import collections
import itertools
import logging
import threading
import time
from dataclasses import dataclass
from inspect import iscoroutinefunction

from asgiref.sync import async_to_sync, sync_to_async
from django.core.exceptions import ImproperlyConfigured
from django.db import close_old_connections

from ..statemachines.models import (
    rows_of,
    runnable_models,
    states_without_handlers,
    timeouts_not_under_lease,
)
from .poller import Poller
from .pool import Pool
from .sentinel import Deadlines

logger = logging.getLogger("steady_queue")

# A full pool sleeps until a thread frees up; this only bounds a missed wake-up.
FULL_POOL_WAIT = 10.0
# A coroutine handler is cancelled on the loop at its timeout; only if the
# loop is blocked (sync code in a coroutine) does the sentinel step in, this
# much later.
ASYNC_GRACE = 2.0


@dataclass(frozen=True, slots=True)
class Run:
    """One leased row whose handler a pool thread runs.

    ``pk`` and ``task_path`` are what Deadlines keys and names a run by: a
    number unique in this runner (rows of two models may share a key) and
    the state whose handler runs.
    """

    pk: int
    model: type
    row: object
    lease: object
    task_path: str


class StateRunner(Poller):
    """Leases due rows for its idle threads, runs their state's handler on
    them, and writes where each row goes next, a batch per poll."""

    kind = "state_runner"

    @property
    def description(self):
        return f"State runner {self.name}"

    def __init__(self, backend, config, **kwargs):
        self.config = config
        super().__init__(backend, **kwargs)
        self.polling_interval = config.polling_interval
        self.pool = Pool(
            config.threads, on_done=self.completed, name=self.name, on_free=self.wake_up
        )
        self.models = []
        # (Run, next State or None), filled by pool threads.
        self.outcomes = collections.deque()
        # Outcomes taken from the deque and not yet written (the database
        # failed): main loop only.
        self.unwritten = []
        # Run number -> Run, for every handler whose thread has not returned,
        # including the ones past their timeout. Main loop only.
        self.running = {}
        # The runs failed for their timeout: what their threads return is dropped.
        self.timed_out = set()
        self.numbers = itertools.count(1)
        self.deadlines = Deadlines()
        # Models are tried in turn, so one busy model does not starve the others.
        self.next_model = 0
        # Off when handlers run on the caller's connection (steady_queue.testing):
        # closing it would end a test's transaction.
        self.manage_connections = True
        # Set once a handler ran past its timeout: lease nothing, drain, exit.
        self.drain_reason = None
        # Why this runner asked to be replaced; None if it was just stopped.
        self.replacement_reason = None

    def metadata(self):
        return {
            "models": ",".join(self.config.models),
            "threads": self.config.threads,
            "lease": self.config.lease,
        }

    def boot(self):
        self.models = runnable_models(self.config.models)
        self.refuse_timeouts_over_lease()
        for model, state in states_without_handlers(self.models):
            logger.error(
                "%s: %s has no handler; its %s rows wait until one is "
                "registered (@%s.handler)",
                self.description,
                state.qualified_name,
                model._meta.label,
                state.qualified_name,
            )
        self.pool.start()
        super().boot()

    def refuse_timeouts_over_lease(self):
        """Raise ImproperlyConfigured, naming them, if any state's timeout is
        not below this runner's lease."""
        lease = self.config.lease
        over = timeouts_not_under_lease(self.models, lease)
        if over:
            listed = ", ".join(
                f"{state.qualified_name} ({state.timeout_under(lease):g} s)"
                for _, state in over
            )
            raise ImproperlyConfigured(
                f"{listed}: a state's timeout must be below the lease of the "
                f"runners that run it ({lease:g} s), or a row could be leased "
                "again while its handler still runs. Lower the timeout, or "
                "raise 'lease' in OPTIONS['state_machines']."
            )

    def poll(self):
        self.record_outcomes()
        if self.deadlines.overdue():
            self.fail_overrunning_handlers()
            return 0
        if self.drain_reason is not None:
            return self.drain_to_replace()
        idle = self.pool.idle_threads
        if self.stopping or idle <= 0 or not self.models:
            wait = FULL_POOL_WAIT if self.models else self.polling_interval
            return self.deadlines.cap(wait)
        wanted = min(idle, self.config.batch_size)
        leased = 0
        for offset in range(len(self.models)):
            model = self.models[(self.next_model + offset) % len(self.models)]
            leased += self.lease(model, wanted - leased)
            if leased >= wanted:
                break
        self.next_model = (self.next_model + 1) % len(self.models)
        return self.deadlines.cap(0 if leased >= wanted else self.polling_interval)

    def lease(self, model, limit):
        """Lease up to ``limit`` due rows of a model and start their handlers.

        Never a row whose handler still runs here: its lease may have ended
        (a hung handler's was recorded as failed), but a second run beside the
        first would only make things worse.
        """
        running = [run.row.pk for run in self.running.values() if run.model is model]
        rows, lease = rows_of(model).lease_due(
            limit, self.config.lease, excluding=running
        )
        for row in rows:
            self.start_handler(model, row, lease)
        return len(rows)

    def start_handler(self, model, row, lease):
        state = row.state_object
        run = Run(next(self.numbers), model, row, lease, state.qualified_name)
        self.running[run.pk] = run
        seconds = state.timeout_under(self.config.lease)
        if iscoroutinefunction(state.handler_function):
            self.deadlines.watch(run, seconds, grace=ASYNC_GRACE)
            self.pool.post_coroutine(lambda: self.arun_watched(run, seconds))
        else:
            self.deadlines.watch(run, seconds)
            self.pool.post(lambda: (run, self.run_watched(run)))

    def run_watched(self, run):
        """On a pool thread: run_handler, where the sentinel can find its stack."""
        self.deadlines.threads[run.pk] = threading.get_ident()
        return self.run_handler(run.row)

    async def arun_watched(self, run, seconds):
        """On the pool's event loop: (run, what its coroutine handler returned)."""
        return run, await self.arun_handler(run.row, seconds)

    def run_handler(self, row):
        """The State the row's handler moves it to, or None.

        A coroutine handler is run to its end here, as async_to_sync runs one
        (steady_queue.testing: its database calls through sync_to_async come
        back to this thread, and so to the test's connection).
        """
        graph = row.state_graph()
        handler = self._handler_of(row, graph)
        if handler is not None and iscoroutinefunction(handler):
            return async_to_sync(self.arun_handler)(row, None)
        self.close_old_connections()
        try:
            if handler is None:
                return None  # no handler, logged at boot; or not in the graph
            returned = handler(row)
            return None if returned is None else graph.get(returned)
        except BaseException as error:
            if isinstance(error, KeyboardInterrupt) and on_main_thread():
                raise  # Ctrl-C, where handlers run on it (steady_queue.testing)
            # SystemExit and KeyboardInterrupt too: raised by a handler, they
            # concern its row alone, which stays where it is and is tried
            # again after the interval; this thread carries on.
            self._log_failure(row, graph)
            return None
        finally:
            self.close_old_connections()

    async def arun_handler(self, row, seconds):
        """The State a row's coroutine handler moves it to, or None; cancelled
        (a failed try) after ``seconds``, the state's timeout."""
        graph = row.state_graph()
        limit = None
        try:
            handler = graph.get(row.state).handler_function
            async with asyncio.timeout(seconds) as limit:
                returned = await handler(row)
            return None if returned is None else graph.get(returned)
        except BaseException as error:
            if limit is not None and limit.expired():
                logger.warning(
                    "%s: the handler of %s.%s ran past its %g s timeout on %s %s "
                    "and was cancelled; tried again after the interval",
                    self.description,
                    graph.__name__,
                    row.state,
                    seconds,
                    row._meta.label,
                    row.pk,
                )
                return None
            if isinstance(error, KeyboardInterrupt) and on_main_thread():
                raise
            # Cancelled at a stop, or failed: the row is tried again.
            self._log_failure(row, graph)
            return None
        finally:
            if self.manage_connections:
                # The thread sync_to_async runs database calls on keeps its
                # connection: it follows CONN_MAX_AGE, as a pool thread's does.
                await sync_to_async(close_old_connections)()

    def _handler_of(self, row, graph):
        """The row's state's handler, or None (none registered, or the row's
        state is not in its graph: that failure is logged as a handler's)."""
        try:
            return graph.get(row.state).handler_function
        except ValueError:
            self._log_failure(row, graph)
            return None

    def _log_failure(self, row, graph):
        logger.exception(
            "%s: the handler of %s.%s failed on %s %s",
            self.description,
            graph.__name__,
            row.state,
            row._meta.label,
            row.pk,
        )

    def close_old_connections(self):
        if self.manage_connections:
            close_old_connections()

    def completed(self, outcome):
        """Called from pool threads: queue the outcome and wake the main loop."""
        self.outcomes.append(outcome)
        self.wake_up()

    def record_outcomes(self):
        """Write the outcomes that came in: one call per model and lease."""
        while self.outcomes:
            run, state = self.outcomes.popleft()
            self.running.pop(run.pk, None)
            if run.pk in self.timed_out:
                self.timed_out.discard(run.pk)
                logger.info(
                    "%s: the handler of %s on %s %s returned after its timeout; "
                    "what it returned is dropped",
                    self.description,
                    run.task_path,
                    run.row._meta.label,
                    run.row.pk,
                )
                continue
            self.deadlines.forget(run.pk)
            self.unwritten.append((run, state))
        batches = collections.defaultdict(list)
        for run, state in self.unwritten:
            batches[run.model, run.lease].append((run, state))
        batches = list(batches.items())
        for index, ((model, lease), batch) in enumerate(batches):
            outcomes = {run.row: state for run, state in batch}
            try:
                written = rows_of(model).record_outcomes(outcomes, lease)
            except Exception:
                # This batch and those after it wait for the next poll (the
                # guard reconnects and backs off); the ones written are not
                # written again. Should a lease run out first, its row is
                # simply run again.
                self.unwritten = [
                    entry for _, rest in batches[index:] for entry in rest
                ]
                raise
            if written < len(outcomes):
                logger.warning(
                    "%s: %d outcome(s) of %s dropped: the row's lease ran out or "
                    "code moved it meanwhile",
                    self.description,
                    len(outcomes) - written,
                    model._meta.label,
                )
        self.unwritten = []

    def fail_overrunning_handlers(self):
        """Record the handlers past their timeout as failed tries; then drain
        and exit to be replaced.

        Their threads cannot be stopped: what they return later is dropped,
        and their rows are not leased here again while they run. The other
        handlers are not abandoned: they finish (each under its own timeout)
        and are recorded, and then the runner exits, which in fork mode ends
        the stuck threads with the process.
        """
        overdue = self.deadlines.overdue()
        described = []
        for number, deadline in overdue.items():
            run = self.running[number]
            stack = self.deadlines.stack_of(number)
            self.deadlines.forget(number)
            self.timed_out.add(number)
            self.unwritten.append((run, None))
            described.append(
                f"the handler of {deadline.task_path} on {run.row._meta.label} "
                f"{run.row.pk} ({deadline.seconds:g} s)"
            )
            logger.warning(
                "%s: %s ran past its timeout and was recorded as a failed try; "
                "its thread cannot be stopped and is abandoned; draining to be "
                "replaced. It was at:\n%s",
                self.description,
                described[-1],
                "".join(stack or ["(its stack is unknown)\n"]),
            )
        if self.drain_reason is None:
            self.drain_reason = f"{len(described)} handler(s) ran past their timeout"
        self.record_outcomes()

    def drain_to_replace(self):
        """Lease nothing; once every handler not abandoned is recorded, exit
        to be replaced."""
        if self.handlers_to_wait_for() or self.unwritten:
            return self.deadlines.cap(FULL_POOL_WAIT)
        logger.info(
            "%s: %s; exiting to be replaced", self.description, self.drain_reason
        )
        self.replacement_reason = self.drain_reason
        self.stop()
        return 0

    def handlers_to_wait_for(self):
        """The runs still going that were not abandoned past their timeout."""
        return [number for number in self.running if number not in self.timed_out]

    def stop_working(self):
        """Let running handlers finish for a while, write their outcomes, stop.

        Rows whose handlers are still running keep their lease: it ends as a
        failed try, and the row is tried again try_interval later.
        """
        timeout = 0 if self.immediate else self.options.shutdown_timeout
        deadline = time.monotonic() + timeout
        # The runs, not the pool: a thread abandoned past its timeout stays busy.
        while self.handlers_to_wait_for():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            self.guard.call(self.record_outcomes)
            self.interruptible_sleep(min(remaining, 0.05))
        self.guard.call(self.record_outcomes)
        self.pool.stop()


def on_main_thread():
    return threading.current_thread() is threading.main_thread()

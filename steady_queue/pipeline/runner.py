"""JobRunner: the one place user code runs, and what its run produced."""

import asyncio
import logging
import traceback
from dataclasses import replace
from datetime import timedelta

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from django.utils import timezone

from ..compat import (
    TaskContext,
    TaskResultStatus,
    task_finished,
    task_started,
)
from ..dialects.leaked_transactions import (
    BEGUN_BY_HAND,
    IN_ATOMIC,
    end_a_runs_connections,
)
from ..exceptions import (
    ArgumentsUnreadableError,
    JobParked,
    ResultNotStorableError,
    Snooze,
    TaskNotFoundError,
    TaskTimeoutError,
    TransactionLeftOpenError,
    timeout_message,
)
from ..tracing import TRACE_KEY, stored_context
from . import job_lines
from .arguments import TAGGED, decode_arguments
from .outcome import (
    FOREVER,
    Outcome,
    not_storable,
    storable_return_value,
    storable_text,
)
from .results import build_result
from .run_context import run_begins, run_ended, running
from .signal_readers import is_read

logger = logging.getLogger("steady_queue")


class JobRunner:
    """Runs claimed jobs for one worker and turns each run into an Outcome."""

    def __init__(
        self,
        backend_class,
        worker_id,
        manage_connections=True,
        tracing=None,
        on_start=None,
    ):
        self.backend_class = backend_class
        self.worker_id = worker_id
        # A steady_queue.tracing.Tracing when OPTIONS["opentelemetry"] is on;
        # None costs a run one test.
        self.tracing = tracing
        # Called with the job id as its run starts, the task function called
        # next (after task_started).
        self.on_start = on_start
        # Off when jobs run on the caller's connection (steady_queue.testing):
        # closing it would end a test's transaction.
        self.manage_connections = manage_connections

    def run(self, claim, task):
        """Run a claimed job's sync task in the calling thread."""
        if self.tracing is None:
            return self._run(claim, task)
        with self.tracing.processing(claim.job, self.worker_id) as ended:
            return ended(self._run(claim, task))

    async def arun(self, claim, task, timeout=None):
        """Run an async task on the worker's event loop, cancelled after timeout."""
        if self.tracing is None:
            return await self._arun(claim, task, timeout)
        with self.tracing.processing(claim.job, self.worker_id) as ended:
            return ended(await self._arun(claim, task, timeout))

    def not_runnable(self, claim, error, task=None):
        """The outcome for a job that could not be started: failed, nothing called."""
        if self.tracing is None:
            return self._failed(claim, task, error)
        with self.tracing.processing(claim.job, self.worker_id) as ended:
            return ended(self._failed(claim, task, error))

    def _run(self, claim, task):
        # The thread's own connections follow CONN_MAX_AGE, as in a request.
        self._close_old_connections()
        run, token = run_begins(claim.job)
        try:
            try:
                self._check_trace_context(claim.job)
                call = self._start(claim, task, _arguments_of(claim.job))
                value = task.func(*call.args, **call.kwargs)
            except Snooze as snooze:
                outcome = self._snoozed(claim, task, snooze)
            except JobParked as parked:
                outcome = self._parked(claim, task, parked)
            except BaseException as error:
                outcome = self._failed(claim, task, error)
            else:
                outcome = None
            finally:
                left_open = self._end_connections()
            if left_open:
                outcome = self._left_open(claim, task, left_open, outcome)
            if outcome is None:
                outcome = self._returned(claim, task, value)
        finally:
            run_ended(token)
        return _with_steps(outcome, run)

    async def _arun(self, claim, task, timeout):
        limit = None
        try:
            self._check_trace_context(claim.job)
            arguments = await _adecode(claim.job)
            call = self._start(claim, task, arguments)
            async with asyncio.timeout(timeout) as limit:
                with running(claim.job, is_async=True):
                    value = await task.func(*call.args, **call.kwargs)
        except Snooze as snooze:
            return self._snoozed(claim, task, snooze)
        except BaseException as error:
            if limit is not None and limit.expired():
                # The cancellation surfaced as TimeoutError; a TimeoutError the
                # task raised itself on time is left as it is.
                error = _timed_out(claim.job, timeout, error)
            return self._failed(claim, task, error)
        return self._returned(claim, task, value)

    def report_finished(self, outcome):
        """Send task_finished for a recorded outcome (failures with their exc_info).

        A failed run that will be retried has not finished its task: it is
        logged, and task_finished waits for the last attempt.
        """
        if outcome.parked is not None:
            job_lines.log_parked(outcome, _what_ends(outcome.parked))
            return
        if outcome.snoozed:
            job_lines.log_snoozed(outcome)
            return
        if outcome.retry_at is not None:
            job_lines.log_retrying(outcome)
            return
        job_lines.log_ended(outcome)
        level = logging.INFO if outcome.succeeded else logging.ERROR
        if not is_read(task_finished, self.backend_class, level):
            return
        status = (
            TaskResultStatus.SUCCESSFUL
            if outcome.succeeded
            else TaskResultStatus.FAILED
        )
        result = build_result(
            outcome.job, outcome.task, status=status, claimed_at=outcome.claimed_at
        )
        if outcome.succeeded or outcome.exception is None:
            task_finished.send(self.backend_class, task_result=result)
            return
        try:
            raise outcome.exception
        except BaseException as raised:
            # Receivers read sys.exc_info() to log the traceback. Raising here
            # put this frame on top of the task's; drop it, so the logged
            # traceback ends where the task failed and shows none of ours.
            if raised.__traceback__ is not None and raised.__traceback__.tb_next:
                raised.__traceback__ = raised.__traceback__.tb_next
            task_finished.send(self.backend_class, task_result=result)

    def _check_trace_context(self, job):
        """Raise ArgumentsUnreadableError for a stored trace context no
        enqueue wrote. Read only where it is used: a worker that does not
        trace passes over it, whatever the row holds."""
        if self.tracing is None:
            return
        carrier, readable = stored_context(job.arguments)
        if not readable:
            raise ArgumentsUnreadableError(
                f"The job's stored trace context ({TRACE_KEY!r}: "
                f"{repr(carrier)[:200]}) is not W3C trace headers (a dict of "
                "strings); the row was changed outside steady_queue or is "
                "corrupt, so nothing was called."
            )

    def _close_old_connections(self):
        if self.manage_connections:
            close_old_connections()

    def _end_connections(self):
        """After a sync run: its connections as a request's end leaves them,
        and any transaction it left open rolled back (``(alias, how)`` where
        it did), so that the thread's next run is not inside it."""
        if not self.manage_connections:
            return []  # the caller's connection, in the caller's transaction
        return end_a_runs_connections()

    def _left_open(self, claim, task, left_open, outcome):
        """The outcome of a run that left transactions open (``(alias, how)``
        pairs), rolled back since: failed with TransactionLeftOpenError if it
        had returned; its own failure (or snooze, or park) otherwise."""
        if outcome is not None:
            logger.warning(
                "job %s (%s) left a transaction open on %s; rolled back",
                claim.job.pk,
                claim.job.task_path,
                ", ".join(repr(alias) for alias, _ in left_open),
            )
            return outcome
        where = {
            how: ", ".join(repr(alias) for alias, kind in left_open if kind == how)
            for how in (IN_ATOMIC, BEGUN_BY_HAND)
        }
        said = []
        if where[IN_ATOMIC]:
            said.append(
                f"The task returned inside transaction.atomic() on "
                f"{where[IN_ATOMIC]} without leaving it (its __enter__() was "
                "called, its __exit__() never was). The block was rolled back: "
                "what the task wrote in it is gone. Use 'with "
                "transaction.atomic():' so that the block commits as it ends."
            )
        if where[BEGUN_BY_HAND]:
            said.append(
                f"The task returned inside a transaction on "
                f"{where[BEGUN_BY_HAND]} that Django did not open (a BEGIN sent "
                "by hand, or the driver's own API). It was rolled back, the "
                "connection closed: what the task wrote in it is gone. Use "
                "transaction.atomic() so that Django commits it."
            )
        error = TransactionLeftOpenError(" ".join(said))
        return self._failed(claim, task, error)

    def _start(self, claim, task, arguments):
        # Decoded once per run, before this: a model argument whose row is gone
        # has raised already, and the task is not called.
        args, kwargs = arguments
        job_lines.log_started(claim.job)
        # Built only for a reader: a task that takes its context, or a
        # receiver of task_started (pipeline/signal_readers.py).
        announced = is_read(task_started, self.backend_class)
        if announced or task.takes_context:
            result = build_result(
                claim.job,
                task,
                status=TaskResultStatus.RUNNING,
                claimed_at=claim.claimed_at,
                worker_ids=[*claim.job.worker_ids, self.worker_id],
            )
        if announced:
            task_started.send(self.backend_class, task_result=result)
        args = list(args)
        if task.takes_context:
            args.insert(0, TaskContext(task_result=result))
        # Last, the task function called next: a kill before this (during a
        # task_started receiver, say) finds the run not begun and its claim
        # goes back to ready (task_started may then be sent again).
        if self.on_start is not None:
            self.on_start(claim.job.pk)
        return _Call(args, kwargs)

    def _returned(self, claim, task, value):
        try:
            value = storable_return_value(value, claim.job.task_path)
        except ResultNotStorableError as error:
            # A value the database would refuse fails this job here, alone:
            # written with a batch of outcomes it would fail them all.
            return self._failed(claim, task, error)
        except Exception as error:
            # A value of the user's whose walk raised (a mapping that fails
            # to iterate): the task ran all the same, so it is not retried.
            return self._failed(claim, task, not_storable(claim.job.task_path, error))
        return self._outcome(claim, task, succeeded=True, return_value=value)

    def _failed(self, claim, task, error):
        kind = type(error)
        return self._outcome(
            claim,
            task,
            succeeded=False,
            error={
                "exception_class_path": f"{kind.__module__}.{kind.__qualname__}",
                "traceback": storable_text("".join(traceback.format_exception(error))),
            },
            exception=None if isinstance(error, TaskNotFoundError) else error,
        )

    def _snoozed(self, claim, task, snooze):
        """The outcome of a run that asked to run again later: the job waits
        ``snooze.seconds``, with no error and no retry spent."""
        outcome = self._outcome(claim, task, succeeded=False, snoozed=True)
        later = outcome.finished_at + timedelta(seconds=snooze.seconds)
        return replace(outcome, retry_at=later)

    def _parked(self, claim, task, parked):
        """The outcome of a run that waits (wait_for_event, durable_sleep):
        snoozed until the wait's end, which the finish may bring forward (an
        event already emitted; models.wait.WaitQuerySet.park_all)."""
        outcome = self._outcome(claim, task, succeeded=False, snoozed=True)
        return replace(outcome, parked=parked, retry_at=parked.until or FOREVER)

    def _outcome(self, claim, task, **produced):
        return Outcome(
            job=claim.job,
            claimed_at=claim.claimed_at,
            task=task,
            worker_id=self.worker_id,
            finished_at=timezone.now(),
            **produced,
        )


def _with_steps(outcome, run):
    """The outcome, marked if its job keeps steps (they go with its row)."""
    if run.steps:
        return replace(outcome, uses_steps=True)
    return outcome


def _what_ends(parked):
    until = None if parked.until is None else parked.until.isoformat()
    if parked.event_name is None:
        return f"its sleep ends at {until}" if until else "its sleep ends"
    emitted = f"the event {parked.event_name!r} is emitted"
    return f"{emitted} (or at {until})" if until else f"{emitted} (no timeout)"


def _arguments_of(job):
    return decode_arguments(job.arguments, job.task_path)


async def _adecode(job):
    if not job.arguments.get(TAGGED):
        return _arguments_of(job)
    # Model arguments are fetched with the ORM, which must not run on the loop.
    return await sync_to_async(_arguments_of)(job)


def _timed_out(job, seconds, cancelled):
    error = TaskTimeoutError(timeout_message(job.task_path, seconds, "was cancelled"))
    try:
        raise error from cancelled
    except TaskTimeoutError as raised:
        # Raised, so its traceback shows where the coroutine was cancelled.
        return raised


class _Call:
    __slots__ = ("args", "kwargs")

    def __init__(self, args, kwargs):
        self.args = args
        self.kwargs = kwargs

"""Every exception steady_queue raises or records, each saying what it means."""

import math
import sys
from datetime import timedelta


class SteadyQueueError(Exception):
    """Base class for steady_queue's own errors."""


class ProcessExitError(SteadyQueueError):
    """The process running the job exited (crashed or was killed) before it ended."""


class ProcessPrunedError(SteadyQueueError):
    """The process running the job stopped heartbeating and was pruned."""


class ProcessMissingError(SteadyQueueError):
    """The job was claimed by a process whose registration no longer exists."""


class TaskNotFoundError(SteadyQueueError):
    """A job's task path does not import, or imports something that is not a task.

    ``missing`` is why, where its module or name is not there (``"no module
    named 'shop.taskz'"``): the message speaks to a job's row, a setting that
    names the task says it its own way (check E014).
    """

    def __init__(self, message, missing=None):
        super().__init__(message)
        self.missing = missing


class ResultNotStorableError(SteadyQueueError, ValueError):
    """The task returned a value the database cannot store; the job failed."""


class TransactionLeftOpenError(SteadyQueueError):
    """The task returned inside a transaction it left open (an atomic block
    never left, or a BEGIN sent by hand): it was rolled back, so what the
    task wrote in it is gone, and the job failed."""


class OutcomeNotStoredError(SteadyQueueError):
    """The database refused to store this run's outcome; the job was failed."""


class ArgumentsUnreadableError(SteadyQueueError):
    """The job row's stored arguments cannot be read back (tampered or corrupt)."""


class NotMigratedError(SteadyQueueError):
    """steady_queue's tables are missing or out of date: run migrate."""


class EnqueueError(SteadyQueueError, ValueError):
    """The call could not be enqueued (bad arguments); nothing was written."""


class ArgumentDecodeError(SteadyQueueError):
    """A job's stored arguments cannot be turned back into Python values."""


class ArgumentRowMissingError(ArgumentDecodeError, LookupError):
    """A model instance passed as an argument no longer exists in the database."""


class TaskTimeoutError(SteadyQueueError, TimeoutError):
    """The task ran longer than its timeout and was stopped."""


class JobCancelledError(SteadyQueueError):
    """An operator cancelled the job while it ran; it is failed and never retried."""


class ConcurrencyKeyError(EnqueueError):
    """A task's concurrency key could not be computed; nothing was written."""


class ConcurrencyLimitDiscarded(SteadyQueueError):
    """The run was dropped: its concurrency key had no free slot.

    Recorded instead of running when the task's limit says on_conflict="discard".
    """


class RateLimitDiscarded(SteadyQueueError):
    """The run was dropped: its rate limit's window had no free slot.

    Recorded instead of running when the task's limit says on_limit="discard".
    """


class DependencyFailedError(SteadyQueueError):
    """The job ended without running: a job it depended on failed for good,
    was discarded or was cancelled (its error names that job)."""


class DependencyError(SteadyQueueError, ValueError):
    """depends_on() was given something that is not a job to wait for, or
    dependency_results() was called outside a running task."""


class Snooze(Exception):
    """Raise it in a task to run the task again after ``seconds``.

    Not a failure: the job goes back to waiting (scheduled) and spends no
    retry; the run counts as an attempt (``attempts``, ``worker_ids``).
    ``seconds`` is a number of seconds (zero or more) or a timedelta.
    """

    def __init__(self, seconds):
        if isinstance(seconds, timedelta):
            seconds = seconds.total_seconds()
        if isinstance(seconds, bool) or not isinstance(seconds, int | float):
            raise TypeError(
                "Snooze(seconds) takes a number of seconds or a timedelta, got "
                f"{seconds!r}."
            )
        if not math.isfinite(seconds) or seconds < 0:
            raise ValueError(
                f"Snooze(seconds) must be zero or more, and finite; got {seconds!r}."
            )
        self.seconds = float(seconds)
        super().__init__(f"snoozed for {self.seconds:g} s")


class EventTimeout(SteadyQueueError, TimeoutError):
    """wait_for_event() waited its whole timeout and the event was not emitted.

    Raised in the task, which may catch it; every later run of the job raises
    it again at the same wait (the timeout is recorded like a step).
    """


class StepError(SteadyQueueError, RuntimeError):
    """step(), wait_for_event() or durable_sleep() was called where it cannot work:
    outside a task run, inside the task's own atomic block, or with a name
    already used in this run."""


class JobParked(BaseException):
    """Raised by wait_for_event() and durable_sleep(): the job parks, and runs
    again from the top when its event is emitted or ``until`` passes.

    A BaseException, as Django's and asyncio's control-flow signals are, so a
    task's ``except Exception`` cannot swallow it and run on without waiting.
    The runner turns it into a parked outcome; never raise it yourself.
    """

    def __init__(self, step_name, event_name=None, until=None):
        self.step_name = step_name
        # None: a durable sleep, which only ``until`` ends.
        self.event_name = event_name
        # When the wait ends anyway (a timeout, or a sleep's end); None: never.
        self.until = until
        what = f"event {event_name!r}" if event_name is not None else "its time"
        super().__init__(f"parked at {step_name!r}, waiting for {what}")


class DuplicateTaskError(EnqueueError):
    """A run of this @unique task with the same key is pending; nothing was written."""

    def __init__(self, task_path, unique_key, pending_job_id):
        self.result_id = str(pending_job_id)
        super().__init__(
            f"{task_path} already has a run holding the unique key "
            f"{unique_key!r} (result id {pending_job_id}; pending, or running "
            'under until="finished"), and its @unique says on_duplicate="refuse". '
            "Wait for that run to start (or end), or use "
            'on_duplicate="merge" to get its result instead.'
        )


class DuplicateSupervisorError(SteadyQueueError):
    """Another supervisor already holds the pidfile on this host."""


class RecurringTaskError(SteadyQueueError, ValueError):
    """A recurring task cannot be scheduled as asked; nothing was changed."""


class RecurringTaskNotFound(SteadyQueueError, LookupError):
    """No recurring task has the given key."""


class BatchError(SteadyQueueError, ValueError):
    """A batch cannot be opened or added to as asked; nothing was written."""


class BatchEndedError(BatchError):
    """Jobs cannot be added to a batch that has ended; nothing was written."""

    def __init__(self, batch_id):
        self.batch_id = batch_id
        super().__init__(
            f"Batch {batch_id} has ended (all its jobs ended and its callbacks "
            "were enqueued), so no jobs can be added to it. Open a new batch "
            "with steady_queue.batch()."
        )


class BatchNotFound(SteadyQueueError, LookupError):
    """No batch has the given id."""


class RunawayJobsError(SteadyQueueError):
    """run_pending() ran its limit of jobs and jobs were still due: a task that
    enqueues itself (or tasks that enqueue each other) never lets it end."""

    def __init__(self, ran, due_by_task):
        self.ran = ran
        self.due_by_task = due_by_task
        due = ", ".join(f"{path} ({count})" for path, count in due_by_task.items())
        super().__init__(
            f"run_pending() ran {ran} jobs and jobs are still due: {due}. A task "
            "that enqueues itself (or tasks that enqueue each other) never lets "
            "the queue empty. If the test means to run more jobs, raise the "
            f"bound: run_pending(runaway_limit={ran * 10}); to run a fixed "
            "number, pass max_tasks=N."
        )


def error_payload(exception_class, message):
    """Return a TaskError-shaped dict for an error that has no traceback."""
    path = f"{exception_class.__module__}.{exception_class.__qualname__}"
    return {"exception_class_path": path, "traceback": f"{path}: {message}\n"}


def cancellation_payload(by, at):
    """The error a running job is failed with when ``by`` cancels it at ``at``."""
    when = at.strftime("%Y-%m-%d %H:%M:%S %Z").strip()
    return error_payload(JobCancelledError, f"Cancelled by {by} at {when}.")


def timeout_message(task_path, seconds, how):
    """Say that a run of ``task_path`` overran its timeout and what was done."""
    return (
        f"The task {task_path!r} ran longer than its {seconds:g} s timeout and "
        f"{how}. Make it faster, or give it more time with @timeout(seconds) or "
        "the backend's 'timeout' option."
    )


def exception_class_of(error):
    """The class an error payload names, or None if it is not loaded.

    A payload is row data: its path is looked up among the modules this
    process has already imported, never imported (that would run a module's
    top-level code on a row's say-so). The class of an error raised here is
    always loaded already.
    """
    try:
        module_path, _, name = error["exception_class_path"].rpartition(".")
    except (KeyError, TypeError, AttributeError):
        return None
    found = sys.modules.get(module_path)
    for part in name.split("."):
        found = getattr(found, part, None)
    return found if isinstance(found, type) else None

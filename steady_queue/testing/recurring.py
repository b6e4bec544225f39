"""Recurring tasks in tests: the run a schedule gives next, and one tick."""

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from ..compat import DEFAULT_TASK_BACKEND_ALIAS, Task
from ..recurring.api import recurring_task
from ..schedules.plan import TaskPlan
from .backends import backend_under_test


@dataclass(frozen=True, slots=True, kw_only=True)
class RecurringRun:
    """One run of a recurring task: when, and the call it enqueues."""

    key: str
    run_at: datetime
    #: The task with the recurring task's queue, priority and backend.
    task: Task
    args: tuple
    kwargs: dict = field(default_factory=dict)


def next_recurring_run(key, *, after=None, backend=DEFAULT_TASK_BACKEND_ALIAS):
    """When the recurring task ``key`` runs next after ``after`` (default:
    now), and what it enqueues then, as a scheduler plans it (never at or
    before a tick already enqueued)."""
    from django.utils import timezone

    after = _aware(after or timezone.now(), "after")
    row = recurring_task(key, backend=backend)
    plan = TaskPlan(row, row.parsed_schedule, after, row.last_run_at(), catch_up=False)
    args, kwargs = row.call_arguments()
    return RecurringRun(
        key=key,
        run_at=plan.next_run_at,
        task=row.task(),
        args=tuple(args),
        kwargs=kwargs,
    )


def run_recurring(at, *, since=None, backend=DEFAULT_TASK_BACKEND_ALIAS):
    """Enqueue what a scheduler enqueues at ``at``; return the TaskResults.

    That is each recurring task's ticks after ``since`` and up to ``at``
    (default: the ticks at ``at`` exactly), as a scheduler last awake at
    ``since`` would: ticks more than a minute late follow the task's
    ``missed`` policy, and a tick already enqueued is not enqueued again.
    The jobs wait for their run time like any job: run them with
    run_pending(run_scheduled=True), or run_pending() once ``at`` has come.
    """
    # Imported when called: pytest loads this package (its plugin) before
    # Django is set up, and these import models.
    from ..processes.scheduler import Scheduler

    at = _aware(at, "at")
    since = _aware(since, "since") if since else at - timedelta(microseconds=1)
    queue_backend = backend_under_test(backend)
    scheduler = Scheduler(queue_backend, queue_backend.config.scheduler)
    try:
        scheduler.store_static_tasks()
        scheduler.load_tasks(catch_up=False, now=since)
        return scheduler.enqueue_due_ticks(now=at)
    finally:
        scheduler.close_wake_pipe()


def _aware(moment, name):
    if moment.tzinfo is None:
        raise ValueError(
            f"{name}={moment!r} has no time zone, so the schedule cannot place "
            "it; pass an aware datetime (django.utils.timezone.make_aware(...), "
            "or tzinfo=datetime.UTC)."
        )
    return moment

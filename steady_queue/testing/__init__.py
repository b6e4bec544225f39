"""Helpers for your own test suite: run pending jobs, and check what was enqueued.

Django's ImmediateBackend runs a task at enqueue, without steady_queue's
argument types or decorators. These helpers keep your configured
steady_queue backend and run its jobs the production way (serialization,
@retry, @limits_concurrency, @unique, @timeout's bookkeeping, signals), in the
calling thread, on the test's own database connection, so they see the rows
of a test's open transaction::

    from steady_queue.testing import assert_enqueued, run_pending

    def test_checkout_sends_the_confirmation(client):
        client.post("/checkout/", {...})
        assert_enqueued(send_order_confirmation, kwargs={"order_id": 1})
        assert run_pending() == 1

With pytest, the ``steady_queue_jobs`` fixture offers the same as methods.
"""

from ..backend import SteadyQueueBackend
from ..compat import DEFAULT_TASK_BACKEND_ALIAS, task_enqueued
from ..exceptions import RunawayJobsError
from ..pipeline.arguments import json_arguments, serialize_arguments
from ..pipeline.results import build_result
from ..states import State
from .backends import backend_under_test
from .recurring import RecurringRun, next_recurring_run, run_recurring
from .state_machines import run_state_machines

__all__ = [
    "RUNAWAY_LIMIT",
    "CapturedJobs",
    "RecurringRun",
    "assert_enqueued",
    "capture_enqueued",
    "enqueued",
    "next_recurring_run",
    "run_pending",
    "run_recurring",
    "run_state_machines",
]


#: How many jobs run_pending() runs, without max_tasks, before it decides
#: that a task keeps enqueuing jobs and raises RunawayJobsError.
RUNAWAY_LIMIT = 1000


def run_pending(
    backend=DEFAULT_TASK_BACKEND_ALIAS,
    *,
    max_tasks=None,
    run_scheduled=False,
    runaway_limit=RUNAWAY_LIMIT,
):
    """Run every job that is due now, until none is left; return how many ran.

    Jobs run one at a time in the calling thread. Scheduled jobs whose time
    has come are run too, and so are the jobs they unblock or retry with no
    wait. A ``run_after`` (or a retry's wait) still in the future is left
    alone unless ``run_scheduled`` is True: then every scheduled job runs at
    once, so a task's retries run to their end. A job's failure does not
    raise here: read it from its result, as in production. ``@timeout``
    cannot interrupt a job run this way.

    A job that raises KeyboardInterrupt, SystemExit or another BaseException
    that is not an Exception is recorded as failed with it (as a worker
    records it; its retry policy applies), and the exception then propagates
    out of run_pending(): Ctrl-C stops a test run. The jobs after it are left
    ready.

    ``max_tasks`` stops after that many jobs. Without it, a run that reaches
    ``runaway_limit`` jobs with jobs still due raises RunawayJobsError, naming
    their tasks: a task that enqueues itself would otherwise run forever.
    """
    # Imported when called: pytest loads this package (its plugin) before
    # Django is set up, and these import models.
    from ..processes.burst import Burst

    queue_backend = backend_under_test(backend)
    burst = Burst(
        queue_backend,
        queue_backend.config.workers,
        max_tasks=runaway_limit if max_tasks is None else max_tasks,
        inline=True,
        run_scheduled=run_scheduled,
    )
    ran = burst.start()
    if max_tasks is None and ran >= runaway_limit:
        due = _due_by_task(queue_backend.database, run_scheduled)
        if due:
            raise RunawayJobsError(ran, due)
    return ran


def _due_by_task(database, run_scheduled):
    """{task path: jobs} of the jobs run_pending() would still run."""
    from collections import Counter

    # Imported when called: pytest loads this package (its plugin) before
    # Django is set up, and these import models.
    from ..models import ReadyExecution, ScheduledExecution

    scheduled = ScheduledExecution.objects.using(database)
    if not run_scheduled:
        scheduled = scheduled.due()
    ready = ReadyExecution.objects.using(database)
    due = Counter(ready.counts_by_task()) + Counter(scheduled.counts_by_task())
    return dict(due.most_common())


def enqueued(task=None, *, queue_name=None, backend=DEFAULT_TASK_BACKEND_ALIAS):
    """TaskResults of the jobs waiting to run (ready, scheduled or blocked).

    Oldest first; narrowed to one task (a Task or its dotted path) and one
    queue when given.
    """
    # Imported when called: pytest loads this package (its plugin) before
    # Django is set up, and these import models.
    from ..models import Job
    from ..models.job.states import in_state, with_state

    queue_backend = backend_under_test(backend)
    jobs = Job.objects.using(queue_backend.database).order_by("pk")
    waiting = (State.READY, State.SCHEDULED, State.BLOCKED)
    pending = jobs.none()
    for state in waiting:
        pending = pending | in_state(jobs, state)
    if task is not None:
        pending = pending.filter(task_path=_path_of(task))
    if queue_name is not None:
        pending = pending.filter(queue_name=queue_name)
    return [
        build_result(job, queue_backend._task_for(job))
        for job in with_state(pending.order_by("pk"))
    ]


def assert_enqueued(
    task,
    *,
    args=None,
    kwargs=None,
    queue_name=None,
    count=None,
    backend=DEFAULT_TASK_BACKEND_ALIAS,
):
    """Fail unless ``task`` has waiting jobs matching the call; return them.

    ``args`` and ``kwargs``, when given, must equal the call's; ``count``,
    when given, is the exact number of matching jobs expected. The failure
    lists what is waiting instead.
    """
    waiting = enqueued(backend=backend)
    return _matching(waiting, task, args, kwargs, queue_name, count, "waiting")


class CapturedJobs(list):
    """The TaskResults enqueued inside a capture_enqueued() block, in order."""

    def assert_enqueued(
        self, task, *, args=None, kwargs=None, queue_name=None, count=None
    ):
        """As assert_enqueued(), over the jobs captured here."""
        return _matching(self, task, args, kwargs, queue_name, count, "captured")


class capture_enqueued:
    """Collect the TaskResult of every steady_queue enqueue inside the block.

    ::

        with capture_enqueued() as captured:
            checkout(order)
        captured.assert_enqueued(send_order_confirmation, count=1)
        assert captured[0].task.run_after is None
    """

    def __enter__(self):
        self.captured = CapturedJobs()
        task_enqueued.connect(self._collect, dispatch_uid=id(self))
        return self.captured

    def __exit__(self, *exc_info):
        task_enqueued.disconnect(dispatch_uid=id(self))
        return False

    def _collect(self, sender, task_result, **kwargs):
        if issubclass(sender, SteadyQueueBackend):
            self.captured.append(task_result)


def _matching(results, task, args, kwargs, queue_name, count, where):
    path = _path_of(task)
    # Results hold JSON (a model as its tagged primary key): compare the
    # expected call in the same form, so args=[order] matches an Order.
    json_args, json_kwargs = _as_results_hold_them(path, args, kwargs)
    found = [
        result
        for result in results
        if result.task.module_path == path
        and (args is None or list(result.args) == json_args)
        and (kwargs is None or result.kwargs == json_kwargs)
        and (queue_name is None or result.task.queue_name == queue_name)
    ]
    if found and (count is None or len(found) == count):
        return found
    wanted = path + "".join(
        f", {name}={value!r}"
        for name, value in (
            ("args", args),
            ("kwargs", kwargs),
            ("queue_name", queue_name),
        )
        if value is not None
    )
    seen = (
        "\n".join(
            f"  {r.task.module_path} args={list(r.args)!r} kwargs={r.kwargs!r} "
            f"queue={r.task.queue_name!r}"
            for r in results
        )
        or "  (none)"
    )
    expected = "at least one" if count is None else f"exactly {count}"
    raise AssertionError(
        f"Expected {expected} {where} job(s) for {wanted}; found {len(found)}. "
        f"The {where} jobs are:\n{seen}"
    )


def _as_results_hold_them(path, args, kwargs):
    stored = serialize_arguments(path, list(args or []), dict(kwargs or {}))
    return json_arguments(stored)


def _path_of(task):
    return task if isinstance(task, str) else task.module_path

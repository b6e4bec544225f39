"""The run in progress: what durable steps, waits and dependency_results()
read to find their job.

The runner sets it around the task's call (a ContextVar, so each pool thread
and each coroutine sees its own run); steady_queue.workflows reads it.
"""

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from django.db import connections

from ..exceptions import StepError

_current = ContextVar("steady_queue_run", default=None)


@dataclass(slots=True, kw_only=True)
class Run:
    """One run of one job, as its steps and waits see it."""

    job: Any  # the claimed steady_queue.models.Job
    database: str
    # How many atomic blocks were open on the job's connection as the task
    # was called (a test's transaction, under steady_queue.testing): a step
    # inside more than these is inside the task's own block.
    atomic_depth: int
    is_async: bool = False
    # The step names used in this run: each may be used once.
    names: set = field(default_factory=set)
    # How many durable_sleep() calls this run made (their default names).
    sleeps: int = 0
    # The job's stored steps, {name: Step}, loaded at the first step of a run
    # (a wait reads a step it misses again: an emit may have stored it since).
    # The wait row is never kept: emits and timeouts delete it mid-run.
    steps: dict | None = None

    def claim_name(self, name):
        """Mark ``name`` used in this run; StepError if it was already."""
        if name in self.names:
            raise StepError(
                f"The step name {name!r} was used twice in one run of job "
                f"{self.job.pk} ({self.job.task_path}): each step, wait and "
                "sleep of a job needs its own name, the same on every run. "
                "Pass distinct names (a loop's index in the name, say)."
            )
        self.names.add(name)

    def refuse_inside_atomic(self, what):
        """StepError if the task opened an atomic block around this call."""
        if len(connections[self.database].atomic_blocks) > self.atomic_depth:
            raise StepError(
                f"{what} was called inside transaction.atomic(): its record must "
                "commit as it returns (or the job, run again after a crash, "
                "would redo it), and inside the block it could only commit with "
                "the block. Call it outside the atomic block, and open the "
                "block inside the step's function instead."
            )


def running_job():
    """The Job row whose task runs here, or None outside a running task
    (what dependency_results() reads, in sync and async tasks alike)."""
    run = _current.get()
    return None if run is None else run.job


def current_run(what):
    """The run in progress here; StepError naming ``what`` if there is none."""
    run = _current.get()
    if run is None:
        raise StepError(
            f"{what} was called outside a task run: steps and waits belong to a "
            "job run by a steady_queue worker (or steady_queue.testing's "
            "run_pending()). Call the function directly when not in a task."
        )
    if run.is_async:
        raise StepError(
            f"{what} was called in an async task: steps and waits work in sync "
            "tasks only for now (they write to the database as they return). "
            "Make the task a plain def."
        )
    return run


@contextmanager
def running(job, is_async=False):
    """Make ``job`` the run in progress for the block; yield its Run."""
    run, token = run_begins(job, is_async)
    try:
        yield run
    finally:
        run_ended(token)


def run_begins(job, is_async=False):
    """Make ``job`` the run in progress until ``run_ended`` is given the
    token; return its Run and that token. A bracket, not a context manager,
    for a short job's run, where the generator cost more than the run."""
    database = job._state.db or "default"
    run = Run(
        job=job,
        database=database,
        atomic_depth=len(connections[database].atomic_blocks),
        is_async=is_async,
    )
    return run, _current.set(run)


def run_ended(token):
    """The run ``run_begins`` gave this token for is no longer in progress."""
    _current.reset(token)

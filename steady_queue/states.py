"""A job's state: the one place it is defined, filtered on, annotated and mapped.

A job is in at most one of the small per-state tables (ready, scheduled,
running, blocked, failed); a job in none of them has finished. Every verb here
reads the small tables first, so counting and filtering stay cheap however
many finished jobs the jobs table keeps.
"""

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from django.db import connections
from django.db.models import Case, Exists, OuterRef, Q, Subquery, Value, When

from .compat import TaskResultStatus
from .dialects import dialect_for

# Above this many rows, finished jobs are estimated, not counted.
COUNT_LIMIT = 10_000


class State(StrEnum):
    """Where a job stands; every state but FINISHED is a table of its own."""

    READY = "ready"
    SCHEDULED = "scheduled"
    RUNNING = "running"
    BLOCKED = "blocked"
    FAILED = "failed"
    FINISHED = "finished"
    # In no table and not finished: only seen inside a transaction that moves
    # a job between tables, or for a row changed by hand.
    UNKNOWN = "unknown"


STATES = tuple(state for state in State if state is not State.UNKNOWN)
# The states kept in their own tables: exact counts, cheap to read.
TABLED = (State.READY, State.SCHEDULED, State.RUNNING, State.BLOCKED, State.FAILED)

# django.tasks knows four statuses: waiting (for any reason) is READY.
TASK_RESULT_STATUS = {
    State.READY: TaskResultStatus.READY,
    State.SCHEDULED: TaskResultStatus.READY,
    State.BLOCKED: TaskResultStatus.READY,
    State.UNKNOWN: TaskResultStatus.READY,
    State.RUNNING: TaskResultStatus.RUNNING,
    State.FAILED: TaskResultStatus.FAILED,
    State.FINISHED: TaskResultStatus.SUCCESSFUL,
}


@dataclass(frozen=True, slots=True)
class Observed:
    """A job's state as read from the tables, with its claim if it is running."""

    state: State
    claimed_at: datetime | None = None
    claimed_by: str | None = None

    @property
    def status(self):
        """The django.tasks TaskResultStatus this state stands for."""
        return TASK_RESULT_STATUS[self.state]


def execution_models():
    """Return {state: execution model} for every state kept in a table."""
    from .models import (
        BlockedExecution,
        ClaimedExecution,
        FailedExecution,
        ReadyExecution,
        ScheduledExecution,
    )

    return {
        State.READY: ReadyExecution,
        State.SCHEDULED: ScheduledExecution,
        State.RUNNING: ClaimedExecution,
        State.BLOCKED: BlockedExecution,
        State.FAILED: FailedExecution,
    }


def in_state(jobs, state):
    """Filter a Job queryset to the jobs in one state."""
    models = execution_models()
    if state in models:
        executions = models[state].objects.using(jobs.db).values("job_id")
        return jobs.filter(pk__in=executions)
    if state == State.FINISHED:
        for model in models.values():
            jobs = jobs.exclude(pk__in=model.objects.using(jobs.db).values("job_id"))
        return jobs.filter(finished_at__isnull=False)
    raise ValueError(f"unknown job state {state!r}; expected one of {STATES}")


def with_state(jobs):
    """Annotate each job with ``state`` and, if running, its claim.

    ``claimed_at`` and ``claimed_by`` (the worker's name) come from the claim
    row; only the rows fetched pay for the subqueries.
    """
    from .models import ClaimedExecution, Process

    whens = [
        When(Exists(model.objects.filter(job=OuterRef("pk"))), then=Value(state))
        for state, model in execution_models().items()
    ]
    whens.append(When(Q(finished_at__isnull=False), then=Value(State.FINISHED)))
    claims = ClaimedExecution.objects.filter(job=OuterRef("pk"))
    claimer = Process.objects.filter(pk=OuterRef("claimed_by_process"))
    return jobs.annotate(
        state=Case(*whens, default=Value(State.UNKNOWN)),
        claimed_at=Subquery(claims.values("created_at")[:1]),
        claimed_by_process=Subquery(claims.values("process_id")[:1]),
    ).annotate(claimed_by=Subquery(claimer.values("name")[:1]))


def observe(job):
    """Return the Observed state of one saved job.

    Read from with_state()'s annotations when the job was loaded with them,
    else from the tables: a result never depends on how its row was loaded.
    """
    if hasattr(job, "state"):
        state = State(job.state)
        if state is not State.RUNNING:
            return Observed(state)
        return Observed(state, job.claimed_at, job.claimed_by)
    from .models import Job

    found = with_state(Job.objects.using(job._state.db).filter(pk=job.pk))
    row = found.values("state", "claimed_at", "claimed_by").first()
    if row is None:
        # Deleted meanwhile: the row in hand is all there is to go by.
        return Observed(State.FINISHED if job.finished_at else State.UNKNOWN)
    return Observed(State(row["state"]), row["claimed_at"], row["claimed_by"])


def state_of(job):
    """Return the State of one saved job."""
    return observe(job).state


def counts_by_state(database):
    """Return {state: count}; ``finished`` is estimated past COUNT_LIMIT rows."""
    from .models import Job

    counts = {
        state: model.objects.using(database).count()
        for state, model in execution_models().items()
    }
    ended = Job.objects.using(database).filter(finished_at__isnull=False)
    # Bounded: the index on finished_at is read for at most COUNT_LIMIT rows.
    ended_count = ended[: COUNT_LIMIT + 1].count()
    if ended_count > COUNT_LIMIT:
        ended_count = max(estimated_rows(database, Job), COUNT_LIMIT)
    counts[State.FINISHED] = max(ended_count - counts[State.FAILED], 0)
    return counts


def is_estimate(counts):
    """Whether counts_by_state() estimated the finished jobs."""
    return counts[State.FINISHED] + counts[State.FAILED] >= COUNT_LIMIT


def estimated_rows(database, model):
    """Return the planner's row estimate for a model's table (0 if unknown)."""
    connection = connections[database]
    table = model._meta.db_table
    with connection.cursor() as cursor:
        estimate = dialect_for(connection).estimated_rows(cursor, table)
    return max(int(estimate or 0), 0)

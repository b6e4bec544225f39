"""A job's state, read from the execution table that holds it.

A job is in at most one of the small per-state tables; a job in none of them
has finished. Every verb here reads the small tables first, so counting and
filtering stay cheap however many finished jobs the jobs table keeps.
"""

from django.db import connections
from django.db.models import Case, Exists, OuterRef, Value, When

from .dialects import dialect_for

# Above this many rows, finished jobs are estimated, not counted.
COUNT_LIMIT = 10_000

STATES = ("ready", "scheduled", "running", "blocked", "failed", "finished")


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
        "ready": ReadyExecution,
        "scheduled": ScheduledExecution,
        "running": ClaimedExecution,
        "blocked": BlockedExecution,
        "failed": FailedExecution,
    }


def in_state(jobs, state):
    """Filter a Job queryset to the jobs in one state."""
    models = execution_models()
    if state in models:
        executions = models[state].objects.using(jobs.db).values("job_id")
        return jobs.filter(pk__in=executions)
    if state == "finished":
        for model in models.values():
            jobs = jobs.exclude(pk__in=model.objects.using(jobs.db).values("job_id"))
        return jobs.filter(finished_at__isnull=False)
    raise ValueError(f"unknown job state {state!r}; expected one of {STATES}")


def with_state(jobs):
    """Annotate each job with ``state``; only the rows fetched pay for it."""
    whens = [
        When(Exists(model.objects.filter(job=OuterRef("pk"))), then=Value(state))
        for state, model in execution_models().items()
    ]
    return jobs.annotate(state=Case(*whens, default=Value("finished")))


def state_of(job):
    """Return the state of one saved job."""
    for state, model in execution_models().items():
        if model.objects.using(job._state.db).filter(job_id=job.pk).exists():
            return state
    return "finished" if job.finished_at else "unknown"


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
    counts["finished"] = max(ended_count - counts["failed"], 0)
    return counts


def is_estimate(counts):
    """Whether counts_by_state() estimated the finished jobs."""
    return counts["finished"] + counts["failed"] >= COUNT_LIMIT


def estimated_rows(database, model):
    """Return the planner's row estimate for a model's table (0 if unknown)."""
    connection = connections[database]
    table = model._meta.db_table
    with connection.cursor() as cursor:
        estimate = dialect_for(connection).estimated_rows(cursor, table)
    return max(int(estimate or 0), 0)

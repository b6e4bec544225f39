"""Filter, annotate and count jobs by state: the one place states meet tables.

Every verb here reads the small per-state tables first, so counting and
filtering stay cheap however many finished jobs the jobs table keeps.
"""

from django.db.models import Case, Exists, OuterRef, Q, Subquery, Value, When

from ...states import STATES, Observed, State
from ..blocked_execution import BlockedExecution
from ..claimed_execution import ClaimedExecution
from ..failed_execution import FailedExecution
from ..process import Process
from ..ready_execution import ReadyExecution
from ..scheduled_execution import ScheduledExecution


def execution_models():
    """Return {state: execution model} for every state kept in a table."""
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
    found = with_state(type(job).objects.using(job._state.db).filter(pk=job.pk))
    row = found.values("state", "claimed_at", "claimed_by").first()
    if row is None:
        # Deleted meanwhile: the row in hand is all there is to go by.
        return Observed(State.FINISHED if job.finished_at else State.UNKNOWN)
    return Observed(State(row["state"]), row["claimed_at"], row["claimed_by"])


def state_of(job):
    """Return the State of one saved job."""
    return observe(job).state

"""step(): run a function once per job, and replay its stored value after."""

from django.utils import timezone

from ..exceptions import ResultNotStorableError
from ..pipeline import return_values
from ..pipeline.outcome import storable_value
from ..pipeline.run_context import current_run

# Step names are stored in a column this long.
MAX_NAME_LENGTH = 200


def step(name, func, *args, **kwargs):
    """Run ``func(*args, **kwargs)`` once for this job; return its value.

    The value is stored (committed) as the function returns; when the job
    runs again (a retry, a crash, a wait that ended) the step returns the
    stored value without calling ``func``. A function that raises stores
    nothing: the error propagates and the step runs again with the job's
    next attempt. The value may be JSON or any type a task may return
    (docs/results.rst); a model instance comes back holding its primary key.
    """
    run = current_run("step()")
    check_name(name, "step()")
    run.claim_name(name)
    recorded = stored_steps(run).get(name)
    if recorded is not None:
        return value_of(recorded, run.job.task_path)
    # Before the function runs: refused after, its effect would be repeated.
    run.refuse_inside_atomic(f"step({name!r})")
    value = func(*args, **kwargs)
    stored = storable(value, name, run.job.task_path)
    models = models_module()
    run.steps[name] = models.Step.objects.using(run.database).record(
        run.job.pk, name, models.step.STEP, stored, timezone.now()
    )
    return value


def stored_steps(run):
    """{name: Step} of the job's stored steps, loaded once per run."""
    if run.steps is None:
        steps = models_module().Step.objects.using(run.database)
        run.steps = steps.by_name(run.job.pk)
    return run.steps


def received_step(run, name):
    """The stored step ``name`` of a wait, or None: from the run's steps if
    there, else read now (and kept).

    An emit records a wait's step in its own transaction, at any moment of
    the run: a step missing from what the run loaded at its start may be
    stored since. The row is the one source of truth of what a run received.
    """
    recorded = stored_steps(run).get(name)
    if recorded is None:
        steps = models_module().Step.objects.using(run.database)
        recorded = steps.stored(run.job.pk, name)
        if recorded is not None:
            run.steps[name] = recorded
    return recorded


def stored_wait(run):
    """The job's wait row, or None; read at each call, never kept: an emit
    or the job's own timeout deletes it while the run goes on."""
    waits = models_module().Wait.objects.using(run.database)
    return waits.filter(job_id=run.job.pk).first()


def value_of(recorded, task_path):
    """The value a stored step returned (a received event's payload as is)."""
    if recorded.kind == models_module().step.EVENT:
        return recorded.value
    return return_values.returned_value(recorded.value, task_path)


def models_module():
    """steady_queue.models, imported on first use rather than with this module:
    ``steady_queue`` exports these functions, and is imported before the app
    registry lets models be."""
    from .. import models

    return models


def check_name(name, what):
    if not isinstance(name, str) or not name or len(name) > MAX_NAME_LENGTH:
        raise ValueError(
            f"{what} takes a name: a non-empty string of at most "
            f"{MAX_NAME_LENGTH} characters, the same on every run; got {name!r}."
        )


def storable(value, name, task_path):
    """The step's value as it is stored; ResultNotStorableError if it cannot be.

    Final for the job (as an unstorable return value is): the step ran, and a
    retry would run it again.
    """
    try:
        stored = storable_value(value, task_path)
    except ResultNotStorableError as error:
        what, advice = error.args
        raise ResultNotStorableError(
            f"The step {name!r} of task {task_path!r} returned a value that "
            f"cannot be stored: {what}. The step did run, so the job failed "
            f"and is not retried (a retry would run the step again). {advice}"
        ) from None
    return stored

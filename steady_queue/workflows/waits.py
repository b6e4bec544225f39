"""wait_for_event() and durable_sleep(): park the job until an event or a time."""

from datetime import timedelta

from django.utils import timezone

from ..exceptions import EventTimeout, JobParked
from ..pipeline.run_context import current_run
from .steps import (
    check_name,
    models_module,
    received_step,
    stored_steps,
    stored_wait,
    value_of,
)


def wait_for_event(name, timeout=None, *, step=None):
    """Return the payload of the event ``name``, parking the job until it is
    emitted; raise EventTimeout if ``timeout`` (a timedelta or seconds)
    passes first.

    An event emitted before the wait began, within OPTIONS["event_retention"]
    (a day by default), is received at once. Parking ends this run: the job
    holds no worker, connection or concurrency slot while it waits, and runs
    again from the top when the event arrives, its finished steps replayed.
    The wait is recorded as the step ``step`` (default ``"event:<name>"``).
    """
    run = current_run("wait_for_event()")
    check_name(name, "wait_for_event()")
    step_name = step or f"event:{name}"
    check_name(step_name, "wait_for_event(step=...)")
    seconds = _seconds(timeout, "wait_for_event(timeout=...)", allow_none=True)
    run.claim_name(step_name)
    models = models_module()
    recorded = received_step(run, step_name)
    if recorded is not None:
        if recorded.kind == models.step.TIMEOUT:
            raise _timed_out(name, recorded.finished_at)
        return value_of(recorded, run.job.task_path)
    run.refuse_inside_atomic(f"wait_for_event({name!r})")
    now = timezone.now()
    wait = stored_wait(run)
    if wait is not None and wait.step_name == step_name:
        if wait.until is None or wait.until > now:
            # Run early (an operator's "run now"): the same wait goes on.
            raise JobParked(step_name, name, wait.until)
        if models.Wait.objects.using(run.database).time_out(run.job.pk, step_name, now):
            raise _timed_out(name, now)
        # An emit released the wait as its time came: it recorded the event.
        recorded = models.Step.objects.using(run.database).get(
            job_id=run.job.pk, name=step_name
        )
        return value_of(recorded, run.job.task_path)
    since = now - models.wait.event_retention(run.job.backend_name)
    events = models.Event.objects.using(run.database)
    emitted = events.received(run.job.backend_name, name, since)
    if emitted:
        return _received(run, step_name, emitted[0][0], now)
    until = None if seconds is None else now + timedelta(seconds=seconds)
    raise JobParked(step_name, name, until)


def durable_sleep(duration, *, step=None):
    """Park the job for ``duration`` (a timedelta or seconds), holding no
    worker, connection or slot; the job runs again from the top after it, its
    finished steps replayed, and this call then returns at once.

    Recorded as the step ``step`` (default ``"sleep:<n>"``, the n-th sleep
    of the run).
    """
    run = current_run("durable_sleep()")
    seconds = _seconds(duration, "durable_sleep(duration)")
    run.sleeps += 1
    step_name = step or f"sleep:{run.sleeps}"
    check_name(step_name, "durable_sleep(step=...)")
    run.claim_name(step_name)
    if step_name in stored_steps(run):
        return
    run.refuse_inside_atomic("durable_sleep()")
    now = timezone.now()
    wait = stored_wait(run)
    if wait is not None and wait.step_name == step_name:
        if wait.until is not None and wait.until > now:
            raise JobParked(step_name, None, wait.until)
        models_module().Wait.objects.using(run.database).wake(
            run.job.pk, step_name, now
        )
        return
    raise JobParked(step_name, None, now + timedelta(seconds=seconds))


def _received(run, step_name, payload, now):
    """Record an event found emitted as the wait's step; return the payload
    stored (an emit that released the wait meanwhile recorded it first)."""
    models = models_module()
    steps = models.Step.objects.using(run.database)
    recorded = steps.record_once(run.job.pk, step_name, models.step.EVENT, payload, now)
    run.steps[step_name] = recorded
    return value_of(recorded, run.job.task_path)


def _timed_out(name, at):
    return EventTimeout(
        f"The event {name!r} was not emitted before the wait's timeout "
        f"(timed out at {at.isoformat()})."
    )


def _seconds(value, what, allow_none=False):
    if value is None and allow_none:
        return None
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(
            f"{what} takes a timedelta or a number of seconds, got {value!r}."
        )
    if value < 0 or value != value or value == float("inf"):
        raise ValueError(f"{what} must be zero or more, and finite; got {value!r}.")
    return float(value)

"""Add, change and remove recurring tasks at runtime, and run one at once."""

from ..backend import steady_queue_backend
from ..compat import DEFAULT_TASK_BACKEND_ALIAS, TASK_TYPES
from ..exceptions import RecurringTaskError, RecurringTaskNotFound
from ..schedules.specs import RecurringSpec, static_specs
from ..schedules.validation import problems


def schedule_recurring_task(
    key,
    *,
    task,
    schedule,
    args=(),
    kwargs=None,
    queue_name=None,
    priority=None,
    timezone=None,
    description="",
    missed="skip",
    backend=None,
):
    """Add or change a dynamic recurring task; running schedulers pick it up.

    ``task`` is a Task or its dotted path; ``backend`` defaults to the task's.
    Raises RecurringTaskError naming every problem, and then changes nothing.
    """
    if isinstance(task, TASK_TYPES):
        task_path, alias = task.module_path, backend or task.backend
    else:
        task_path, alias = task, backend or DEFAULT_TASK_BACKEND_ALIAS
    steady = _steady_queue_backend(alias)
    if not steady.config.scheduler.dynamic_tasks:
        raise RecurringTaskError(
            f"Dynamic recurring tasks are off for TASKS[{alias!r}], so no scheduler "
            f"would run {key!r}: set OPTIONS['scheduler']['dynamic_tasks'] = True."
        )
    spec = RecurringSpec(
        key=key,
        task=task_path,
        schedule=schedule,
        args=tuple(args),
        kwargs=dict(kwargs or {}),
        queue_name=queue_name,
        priority=priority,
        timezone=timezone,
        description=description,
        missed=missed,
        backend=alias,
        origin=f"schedule_recurring_task({key!r})",
    )
    found = problems(spec)
    if found:
        raise RecurringTaskError("\n".join(message for _, message, _ in found))
    return _recurring_tasks(steady.database).schedule_dynamic(spec)


def unschedule_recurring_task(key, *, backend=DEFAULT_TASK_BACKEND_ALIAS):
    """Remove a dynamic recurring task; running schedulers stop enqueueing it."""
    database = _steady_queue_backend(backend).database
    if not _recurring_tasks(database).unschedule(key):
        raise RecurringTaskNotFound(f"No dynamic recurring task has the key {key!r}.")


def run_now(key, *, backend=DEFAULT_TASK_BACKEND_ALIAS):
    """Enqueue a recurring task's job at once; return its TaskResult.

    The job is not a tick: the schedule goes on as before.
    """
    return recurring_task(key, backend=backend).enqueue_now()


def recurring_task(key, *, backend=DEFAULT_TASK_BACKEND_ALIAS):
    """The RecurringTask of ``key``: its stored row, or (for a static task no
    scheduler has stored yet) an unsaved one built from its declaration."""
    steady = _steady_queue_backend(backend)
    tasks = _recurring_tasks(steady.database)
    row = tasks.filter(key=key).first()
    if row is None:
        spec = next((s for s in static_specs(steady.config) if s.key == key), None)
        if spec is None:
            raise RecurringTaskNotFound(f"No recurring task has the key {key!r}.")
        row = tasks.model.from_spec(spec, static=True)
    return row


def _recurring_tasks(database):
    """RecurringTask.objects on ``database``.

    The model is imported when first used: projects import this module (as
    steady_queue.recurring) from their tasks modules, which may load with the
    apps, before models can be imported.
    """
    from ..models import RecurringTask

    return RecurringTask.objects.using(database)


def _steady_queue_backend(alias):
    return steady_queue_backend(
        alias,
        RecurringTaskError(
            f"TASKS[{alias!r}] is not a SteadyQueueBackend; only steady_queue "
            "backends run recurring tasks."
        ),
    )

"""A batch's callbacks, checked when the batch opens (Batch.enqueue_callback
enqueues them when it ends)."""

import inspect

from ..backend import SteadyQueueBackend
from ..compat import TASK_TYPES
from ..exceptions import BatchError
from ..states.batches import ARGUMENT, EVENTS


def callback_specs(callbacks, database):
    """{event: spec} for the on_* tasks given; raise BatchError for a bad one.

    A spec keeps what enqueueing needs later, in another process: the task's
    path and the queue, priority and backend it was given with .using().
    """
    return {
        EVENTS[name]: _spec(name, task, database)
        for name, task in callbacks.items()
        if task is not None
    }


def _spec(name, task, database):
    if not isinstance(task, TASK_TYPES):
        raise BatchError(
            f"{name} must be a task (a function decorated with @task), not {task!r}."
        )
    backend = task.get_backend()
    if not isinstance(backend, SteadyQueueBackend) or backend.database != database:
        raise BatchError(
            f"{name}={task.module_path} uses the backend {task.backend!r}, which "
            f"does not keep its jobs in the batch's database {database!r}: its "
            "callback could not be enqueued with the batch's last job. Give it "
            "a SteadyQueueBackend on that database (task.using(backend=...))."
        )
    if task.run_after is not None:
        raise BatchError(
            f"{name}={task.module_path} has run_after set; a callback is "
            "enqueued when its batch ends and runs then. Leave run_after out "
            "(the callback may enqueue a deferred task itself)."
        )
    leading = [None] if task.takes_context else []
    try:
        inspect.signature(task.func).bind(*leading, **{ARGUMENT: None})
    except TypeError:
        raise BatchError(
            f"{name}={task.module_path} must take the keyword argument "
            f"{ARGUMENT!r}: the batch's status, as a dict (id, event, state, "
            "size, finished, failed, discarded, metadata). Add a 'batch' "
            "parameter to the task."
        ) from None
    return {
        "task_path": task.module_path,
        "queue_name": task.queue_name,
        "priority": task.priority,
        "backend": task.backend,
    }

"""Finds the task a job row names, refusing anything that is not a task."""

from django.utils.module_loading import import_string

from .compat import Task
from .exceptions import TaskNotFoundError

_loaded = {}


def load_task(task_path):
    """Return the Task at ``task_path`` or raise TaskNotFoundError.

    Only objects made by ``@task`` run: a path to any other callable fails the
    job without calling it. Successful look-ups are cached per process.
    """
    task = _loaded.get(task_path)
    if task is not None:
        return task
    try:
        found = import_string(task_path)
    except ImportError as e:
        raise TaskNotFoundError(
            f"The task {task_path!r} cannot be imported ({e}). Was it renamed or "
            "removed after this job was enqueued? Deploy code that still defines it, "
            "or discard the job."
        ) from e
    if not isinstance(found, Task):
        kind = type(found)
        raise TaskNotFoundError(
            f"{task_path!r} is a {kind.__module__}.{kind.__qualname__}, not a task; "
            "only functions decorated with @task are run, so nothing was called."
        )
    _loaded[task_path] = found
    return found

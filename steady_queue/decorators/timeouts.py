"""@timeout(seconds): how long one run of a task may take before it is stopped."""

from ..exceptions import TaskTimeoutError, error_payload, timeout_message
from .task_settings import seconds_setting, setting_decorator, setting_of

ATTRIBUTE = "steady_queue_timeout"
_UNSET = object()


def timeout(seconds):
    """Limit each run of a task to ``seconds`` (a number, a timedelta, or None).

    Stack it with ``@task`` in either order. None turns off the backend's
    default ``timeout`` for this task.
    """
    return setting_decorator("timeout", ATTRIBUTE, _seconds(seconds))


def timeout_for(task, default):
    """Seconds a run of ``task`` may take: its own @timeout, else ``default``."""
    limit = setting_of(task, ATTRIBUTE, _UNSET)
    return default if limit is _UNSET else limit


def _seconds(value):
    return seconds_setting(value, "@timeout(seconds)", allow_none=True)


def overrun_error(task_path, seconds, stack, stopped=True):
    """A TaskError-shaped payload for a sync run its worker's sentinel ended.

    ``stopped``: its process is being replaced (fork mode); else its thread
    runs on (thread mode). ``stack`` is the formatted stack of the thread that
    ran it, so the error shows where the task was when its time ran out.
    """
    how = (
        "was stopped by replacing its worker"
        if stopped
        else "was failed; its thread cannot be stopped in thread mode and runs "
        "on, its result ignored"
    )
    message = timeout_message(task_path, seconds, how)
    payload = error_payload(TaskTimeoutError, message)
    if stack:
        payload["traceback"] = (
            "Where the task was when it timed out (most recent call last):\n"
            + "".join(stack)
            + payload["traceback"]
        )
    return payload

"""The job whose task runs in this thread or coroutine, for what a task
reads of its own job from inside (dependency_results())."""

from contextlib import contextmanager
from contextvars import ContextVar

_running = ContextVar("steady_queue_running_job", default=None)


def running_job():
    """The Job row whose task runs here, or None outside a running task."""
    return _running.get()


@contextmanager
def running(job):
    """Make ``job`` the running job inside the block."""
    token = _running.set(job)
    try:
        yield job
    finally:
        _running.reset(token)

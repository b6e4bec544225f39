"""Every exception steady_queue raises or records, each saying what it means."""


class SteadyQueueError(Exception):
    """Base class for steady_queue's own errors."""


class ProcessExitError(SteadyQueueError):
    """The process running the job exited (crashed or was killed) before it ended."""


class ProcessPrunedError(SteadyQueueError):
    """The process running the job stopped heartbeating and was pruned."""


class ProcessMissingError(SteadyQueueError):
    """The job was claimed by a process whose registration no longer exists."""


class TaskNotFoundError(SteadyQueueError):
    """A job's task path does not import, or imports something that is not a task."""


class EnqueueError(SteadyQueueError, ValueError):
    """The call could not be enqueued (bad arguments); nothing was written."""


class DuplicateSupervisorError(SteadyQueueError):
    """Another supervisor already holds the pidfile on this host."""


class RecurringTaskError(SteadyQueueError, ValueError):
    """A recurring task cannot be scheduled as asked; nothing was changed."""


class RecurringTaskNotFound(SteadyQueueError, LookupError):
    """No recurring task has the given key."""


def error_payload(exception_class, message):
    """Return a TaskError-shaped dict for an error that has no traceback."""
    path = f"{exception_class.__module__}.{exception_class.__qualname__}"
    return {"exception_class_path": path, "traceback": f"{path}: {message}\n"}

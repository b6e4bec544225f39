"""steady_queue: a database-backed backend for Django's task framework."""

__version__ = "0.1.0"

from .batches import add_to_batch, batch, get_batch
from .decorators.concurrency import limits_concurrency
from .decorators.on_commit import enqueue_on_commit
from .decorators.rate import limits_rate
from .decorators.retries import exponential, fixed, retry
from .decorators.timeouts import timeout
from .decorators.unique import unique
from .exceptions import Snooze
from .pipeline.arguments import call_arguments

__all__ = [
    "Snooze",
    "__version__",
    "add_to_batch",
    "batch",
    "call_arguments",
    "enqueue_many",
    "enqueue_on_commit",
    "exponential",
    "fixed",
    "get_batch",
    "limits_concurrency",
    "limits_rate",
    "retry",
    "timeout",
    "unique",
]


def enqueue_many(task, calls):
    """Enqueue many ``(args, kwargs)`` calls of a task in a few statements.

    Returns their TaskResults. The task's backend must be a SteadyQueueBackend.
    """
    backend = task.get_backend()
    if not hasattr(backend, "enqueue_many"):
        raise TypeError(
            f"enqueue_many() needs a SteadyQueueBackend; the task {task.module_path!r}"
            f" uses {type(backend).__module__}.{type(backend).__qualname__}."
        )
    return backend.enqueue_many(task, calls)

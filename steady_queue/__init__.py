"""steady_queue: a database-backed backend for Django's task framework."""

__version__ = "0.1.0"

# The subpackage steady_queue.recurring (the runtime API) is imported before
# the decorator of the same name is bound: a submodule's first import sets it
# as an attribute of this package, which would otherwise replace the decorator
# whenever the subpackage happened to load after this module.
from . import recurring as _recurring_api  # noqa: F401
from .batches import add_to_batch, batch, get_batch
from .decorators.concurrency import limits_concurrency
from .decorators.debounce import debounce
from .decorators.fair import fair
from .decorators.on_commit import enqueue_on_commit
from .decorators.rate import limits_rate
from .decorators.retries import exponential, fixed, retry
from .decorators.timeouts import timeout
from .decorators.unique import unique
from .dependencies import dependency_results, depends_on
from .exceptions import EventTimeout, Snooze
from .pipeline.arguments import call_arguments
from .schedules.specs import recurring
from .workflows import durable_sleep, emit_event, step, wait_for_event

__all__ = [
    "EventTimeout",
    "Snooze",
    "__version__",
    "add_to_batch",
    "batch",
    "call_arguments",
    "debounce",
    "dependency_results",
    "depends_on",
    "durable_sleep",
    "emit_event",
    "enqueue_many",
    "enqueue_on_commit",
    "exponential",
    "fair",
    "fixed",
    "get_batch",
    "limits_concurrency",
    "limits_rate",
    "recurring",
    "retry",
    "step",
    "timeout",
    "unique",
    "wait_for_event",
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

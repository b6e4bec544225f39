"""enqueue_on_commit(): enqueue a call once the caller's transaction commits."""

from functools import partial

from django.db import transaction

from ..pipeline.arguments import serialize_arguments
from ..pipeline.open_dependencies import open_dependencies, waiting_for


def enqueue_on_commit(task, *args, **kwargs):
    """Enqueue ``task(*args, **kwargs)`` when the current transaction commits.

    Outside a transaction it is enqueued at once. The arguments are checked
    now, so a bad one raises here rather than after the commit. Nothing is
    returned: the job does not exist until the commit. The callback is
    registered on the ``default`` database; for another, use
    ``transaction.on_commit(partial(task.enqueue, ...), using=alias)``.
    Inside a depends_on() block, the job waits for its jobs all the same.
    """
    serialize_arguments(task.module_path, args, kwargs)
    transaction.on_commit(partial(_enqueue, open_dependencies(), task, *args, **kwargs))


def _enqueue(dependencies, task, *args, **kwargs):
    with waiting_for(dependencies):
        task.enqueue(*args, **kwargs)

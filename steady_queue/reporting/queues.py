"""Each queue's size by state, latency and pause, read from the small tables."""

from django.utils import timezone

from ..compat import DEFAULT_TASK_QUEUE_NAME
from ..models import Pause, ReadyExecution
from ..models.job.states import execution_models


def queue_overview(database, configured=(), now=None):
    """Return one dict per queue: counts by state, latency and whether paused.

    Latency is the age of the queue's oldest ready job (0 when none is ready).
    ``configured`` adds queues that are declared but empty.
    """
    now = now or timezone.now()
    counts = {
        state: model.objects.using(database).counts_by_queue()
        for state, model in execution_models().items()
    }
    oldest_ready = ReadyExecution.objects.using(database).oldest_by_queue()
    paused = Pause.objects.using(database).paused_queue_names()
    names = sorted(set(configured).union(*counts.values(), paused))
    return [
        {
            "name": name,
            "paused": name in paused,
            **{state: counts[state].get(name, 0) for state in counts},
            "latency_seconds": round((now - oldest_ready[name]).total_seconds(), 3)
            if name in oldest_ready
            else 0.0,
        }
        for name in names
    ]


def configured_queue_names(backend):
    """The queue names a backend declares in QUEUES (wildcards left out).

    A backend without QUEUES allows any name; the default queue, where a task
    goes unless it names another, is shown for it (as Django's default was).
    """
    if not getattr(backend, "queues_listed", True):
        return [DEFAULT_TASK_QUEUE_NAME]
    return [name for name in getattr(backend, "queues", None) or () if "*" not in name]

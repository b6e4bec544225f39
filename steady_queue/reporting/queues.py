"""Each queue's size by state, latency and pause, read from the small tables."""

from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone

from ..compat import DEFAULT_TASK_QUEUE_NAME
from ..models import Pause, ReadyExecution, RecurringTask
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


def known_queue_names(backend, database):
    """Every queue a backend knows of before it has jobs, for the admin.

    The names in QUEUES, those its workers are configured to run (wildcards
    left out) and those its recurring tasks enqueue on: so a queue can be
    found, and paused, before its first job. Queues with jobs or paused are
    added by queue_overview.
    """
    names = set(configured_queue_names(backend))
    try:
        workers = backend.config.workers
    except (AttributeError, ImproperlyConfigured):
        # Not a steady_queue backend, or its OPTIONS are E002's to report.
        workers = ()
    names.update(
        name for worker in workers for name in worker.queues if "*" not in name
    )
    names.update(RecurringTask.objects.using(database).queue_names(backend.alias))
    return sorted(names)


def listed_queues(backend, database, now=None):
    """The queues ``status`` and the admin list alike (queue_overview rows):
    those with jobs or paused, and those known_queue_names finds empty."""
    return queue_overview(database, known_queue_names(backend, database), now)

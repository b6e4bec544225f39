"""A task's limits together: its @limits_concurrency and its @limits_rate.

A job keeps the keys its call resolved to at enqueue; whenever it must pass
its limits again (dispatched, released, retried) they are paired back, by
position, with the limits its task declares now.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..pipeline.loader import tasks_by_path
from .concurrency import ConcurrencyLimit, concurrency_limits_of
from .rate import RateLimit, rate_limits_of


@dataclass(frozen=True, slots=True)
class TaskLimits:
    """The concurrency and rate limits of one task, the topmost first."""

    concurrency: tuple[ConcurrencyLimit, ...] = ()
    rate: tuple[RateLimit, ...] = ()

    def keys_for(self, task, args, kwargs):
        """(concurrency keys, rate keys) of one call, in the limits' order.

        Raises ConcurrencyKeyError when a key callable fails or returns
        something that is not a string, an integer or a model instance.
        """
        return (
            tuple(limit.key_for(task, args, kwargs) for limit in self.concurrency),
            tuple(limit.key_for(task, args, kwargs) for limit in self.rate),
        )

    def concurrency_pairs(self, keys):
        """(key, ConcurrencyLimit) for a job's stored concurrency keys.

        A key with no limit at its position any more (the task lost one since
        the job was enqueued) is left out: the job is not held back by it.
        """
        return list(zip(keys, self.concurrency, strict=False))

    def rate_pairs(self, keys):
        """(key, RateLimit) for a job's stored rate keys, as concurrency_pairs."""
        return list(zip(keys, self.rate, strict=False))

    @property
    def may_discard(self):
        """Whether a job under these limits may be discarded for want of a slot."""
        return any(limit.on_conflict == "discard" for limit in self.concurrency) or any(
            limit.on_limit == "discard" for limit in self.rate
        )


def limits_of(task):
    """The task's TaskLimits, or None if it has no limit."""
    concurrency = concurrency_limits_of(task)
    rate = rate_limits_of(task)
    if not concurrency and not rate:
        return None
    return TaskLimits(concurrency, rate)


def limits_by_job(jobs):
    """{job id: TaskLimits or None} for saved jobs; None for unlimited ones.

    Each task is looked up once. A job whose task no longer imports is let
    through (None): the worker fails it with TaskNotFoundError without calling
    anything.
    """
    tasks = tasks_by_path({job.task_path for job in jobs if job.is_limited})
    limits = {path: limits_of(task) for path, task in tasks.items() if task}
    return {job.pk: limits.get(job.task_path) for job in jobs}

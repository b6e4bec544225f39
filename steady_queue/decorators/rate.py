"""@limits_rate: at most N starts of a task (or a group of tasks) per key and period.

Stacked, every limit holds (10 a second and 500 an hour, say). A run over its
rate is not failed: it waits, blocked, for the next free slot of its window.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .concurrency import (
    check_group,
    check_key,
    check_to,
    distinct_groups,
    key_for_call,
)
from .task_settings import seconds_setting, setting_of, stacking_decorator

ATTRIBUTE = "_steady_queue_rate"
ON_LIMIT = ("wait", "discard")


@dataclass(frozen=True, slots=True)
class RateLimit:
    """The settings of one @limits_rate: ``to`` starts per ``per`` seconds."""

    to: int
    per: float
    key: str | Callable | None = None
    group: str | None = None
    on_limit: str = "wait"

    def key_for(self, task, args, kwargs):
        """Return the rate key of one call, e.g. ``"app.geocode/api.example.com"``.

        Raises ConcurrencyKeyError when the key callable fails or returns
        something that is not a string, an integer or a model instance.
        """
        return key_for_call(
            self.group, self.key, task, args, kwargs, kind="rate limit key"
        )


def limits_rate(to, per, *, key=None, group=None, on_limit="wait"):
    """Allow at most ``to`` starts of the task per key in any ``per`` window.

    ``per`` is a duration: seconds, a timedelta, or a text such as "1s" or
    "15m". ``key`` and ``group`` work as for @limits_concurrency: a string or
    a callable over the task's arguments; tasks sharing a group share a rate.
    A run over the rate waits, blocked, and starts in its key's next free slot
    (highest priority first, then oldest); with ``on_limit="discard"`` it is
    recorded as failed without running instead. Counted across every worker
    and host, by the database's clock. Stack it above or below ``@task``, and
    with @limits_concurrency.
    """
    limit = RateLimit(
        to=check_to(to, "limits_rate"),
        per=seconds_setting(per, "@limits_rate(per=...)"),
        key=check_key(key, "limits_rate"),
        group=check_group(group, "limits_rate"),
        on_limit=_check_on_limit(on_limit),
    )
    return stacking_decorator(
        "limits_rate", ATTRIBUTE, limit, distinct_groups("limits_rate")
    )


def rate_limits_of(task):
    """The task's RateLimits, the topmost decorator's first; () if none."""
    return setting_of(task, ATTRIBUTE, ())


def _check_on_limit(on_limit):
    if on_limit not in ON_LIMIT:
        raise ValueError(
            f"@limits_rate(on_limit=...) must be one of {ON_LIMIT}, got {on_limit!r}."
        )
    return on_limit

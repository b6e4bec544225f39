"""@fair: the task's jobs take turns with other tenants' jobs in their queue."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .concurrency import check_group, check_key, key_for_call
from .task_settings import setting_decorator, setting_of

ATTRIBUTE = "_steady_queue_fair"


@dataclass(frozen=True, slots=True)
class FairTurns:
    """The settings of one @fair: the tenant key, and the group of tasks
    whose jobs count as one tenant's when their keys are equal."""

    key: str | Callable | None = None
    group: str | None = None

    def key_for(self, task, args, kwargs):
        """The tenant key of one call, e.g. ``"tenants/shop.customer/7"``."""
        return key_for_call(self.group, self.key, task, args, kwargs, kind="fair key")


def fair(key=None, *, group=None):
    """Let the task's jobs take turns across tenants: while several tenants
    have jobs ready at one priority in a queue, workers take one job of each
    in turn, so one tenant's burst delays another's job by a turn, not by
    the burst.

    ``key`` names the tenant of a call: a string or a callable over the
    task's arguments (a model instance it returns becomes
    ``"<app_label>.<model>/<pk>"``); without one, every run of the task is
    one tenant. Tasks sharing a ``group`` share their tenants' turns: a
    customer's reports and exports take turns together. Stack it with
    ``@task`` in either order.
    """
    settings = FairTurns(key=check_key(key, "fair"), group=check_group(group, "fair"))
    return setting_decorator("fair", ATTRIBUTE, settings)


def fair_of(task):
    """Return the task's FairTurns, or None."""
    return setting_of(task, ATTRIBUTE)

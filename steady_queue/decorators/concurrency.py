"""@limits_concurrency: at most N runs of a task (or a group of tasks) per key.

Stacked, every limit holds: a run starts only with a slot of each of its keys.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from ..exceptions import ConcurrencyKeyError
from .task_settings import seconds_setting, setting_of, stacking_decorator

ATTRIBUTE = "_steady_queue_concurrency"
ON_CONFLICT = ("block", "discard")
DEFAULT_DURATION = timedelta(minutes=3)
# Semaphore.key and BlockedExecution.concurrency_key hold 255 characters.
MAX_KEY_LENGTH = 255


@dataclass(frozen=True, slots=True)
class ConcurrencyLimit:
    """The settings of one @limits_concurrency."""

    to: int = 1
    key: str | Callable | None = None
    duration: timedelta | None = None
    group: str | None = None
    on_conflict: str = "block"

    def key_for(self, task, args, kwargs):
        """Return the concurrency key of one call, e.g. ``"app.sync/shop.account/7"``.

        Raises ConcurrencyKeyError when the key callable fails or returns
        something that is not a string, an integer or a model instance.
        """
        return key_for_call(self.group, self.key, task, args, kwargs)


def limits_concurrency(
    to=1, *, key=None, duration=None, group=None, on_conflict="block"
):
    """Allow at most ``to`` runs of the task per key at once.

    ``key`` is a string or a callable over the task's arguments (a model instance
    it returns becomes ``"<app_label>.<model>/<pk>"``); without one, the limit
    covers every run of the task. Tasks sharing a ``group`` share their limits.
    A run that finds no free slot waits in the blocked state, or with
    ``on_conflict="discard"`` is dropped and recorded as failed. ``duration``
    bounds how long a slot stays taken if its holder dies without giving it back.
    Stack it above or below ``@task``.
    """
    limit = ConcurrencyLimit(
        to=check_to(to),
        key=check_key(key),
        duration=_check_duration(duration),
        group=check_group(group),
        on_conflict=_check_on_conflict(on_conflict),
    )

    return stacking_decorator(
        "limits_concurrency", ATTRIBUTE, limit, distinct_groups("limits_concurrency")
    )


def concurrency_limits_of(task):
    """The task's ConcurrencyLimits, the topmost decorator's first; () if none."""
    return setting_of(task, ATTRIBUTE, ())


def limit_of(task):
    """Return the task's (first) ConcurrencyLimit, or None if it has none."""
    limits = concurrency_limits_of(task)
    return limits[0] if limits else None


def distinct_groups(decorator):
    """A check for stacking_decorator: stacked limits of one kind must have
    different groups, or two of their keys could be one and the same."""

    def check(limit, earlier):
        groups = {other.group for other in earlier}
        if limit.group in groups:
            named = "no group" if limit.group is None else f"group={limit.group!r}"
            raise ValueError(
                f"Two stacked @{decorator} on one task have {named}: their keys "
                "would be the same whenever the key callables return the same "
                "value, and they would share one limit. Give each stacked "
                f"@{decorator} its own group, e.g. group='per-customer'."
            )

    return check


def key_for_call(group, key, task, args, kwargs, kind="concurrency key"):
    """``"<group>/<key>"`` for one call: ``key`` is a value or a callable of it.

    The group defaults to the task's path. Raises ConcurrencyKeyError (naming
    ``kind``) when a key callable fails or returns something that is not a
    string, an integer or a model instance.
    """
    from django.db.models import Model

    value = key
    if callable(value):
        try:
            value = value(*args, **kwargs)
        except Exception as error:
            raise ConcurrencyKeyError(
                f"The {kind} of {task.module_path!r} raised "
                f"{type(error).__name__}: {error}. The key callable is called "
                "with the task's own arguments and must return a string, an "
                "integer or a model instance. Nothing was enqueued."
            ) from error
    if value is None:
        text = ""
    elif isinstance(value, Model):
        text = f"{value._meta.label_lower}/{value.pk}"
    elif isinstance(value, str | int) and not isinstance(value, bool):
        text = str(value)
    else:
        raise ConcurrencyKeyError(
            f"The {kind} of {task.module_path!r} is a {type(value).__qualname__} "
            f"({value!r}); it must be a string, an integer or a model instance. "
            "Nothing was enqueued."
        )
    return fit_key(f"{group or task.module_path}/{text}")


def fit_key(key):
    """The key, shortened to fit its column; long keys stay distinct by digest."""
    if len(key) <= MAX_KEY_LENGTH:
        return key
    digest = hashlib.sha256(key.encode()).hexdigest()
    return f"{key[: MAX_KEY_LENGTH - len(digest) - 1]}#{digest}"


def check_to(to, decorator="limits_concurrency"):
    """The ``to`` setting of a decorator, if it is a positive integer."""
    if isinstance(to, bool) or not isinstance(to, int) or to < 1:
        raise ValueError(
            f"@{decorator}(to=...) must be a positive integer, got {to!r}."
        )
    return to


def check_key(key, decorator="limits_concurrency"):
    """The key setting of a decorator, if it is a string, a callable or None."""
    if key is not None and not isinstance(key, str) and not callable(key):
        raise TypeError(
            f"@{decorator}(key=...) must be a string or a callable taking the "
            f"task's arguments, got {type(key).__qualname__}."
        )
    return key


def _check_duration(duration):
    seconds = seconds_setting(
        duration, "@limits_concurrency(duration=...)", allow_none=True
    )
    return None if seconds is None else timedelta(seconds=seconds)


def check_group(group, decorator="limits_concurrency"):
    """The ``group`` setting of a decorator, if it is None or a non-empty string."""
    if group is not None and (not isinstance(group, str) or not group):
        raise ValueError(
            f"@{decorator}(group=...) must be a non-empty string, got {group!r}."
        )
    return group


def _check_on_conflict(on_conflict):
    if on_conflict not in ON_CONFLICT:
        raise ValueError(
            f"@limits_concurrency(on_conflict=...) must be one of {ON_CONFLICT}, "
            f"got {on_conflict!r}."
        )
    return on_conflict

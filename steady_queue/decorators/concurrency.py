"""@limits_concurrency: at most N runs of a task (or a group of tasks) per key."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from ..exceptions import ConcurrencyKeyError
from ..pipeline.loader import tasks_by_path
from .task_settings import seconds_setting, setting_decorator, setting_of

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
        something that is not a string, a number or a model instance.
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
        to=_check_to(to),
        key=check_key(key),
        duration=_check_duration(duration),
        group=_check_group(group),
        on_conflict=_check_on_conflict(on_conflict),
    )

    return setting_decorator("limits_concurrency", ATTRIBUTE, limit)


def limit_of(task):
    """Return the task's ConcurrencyLimit, or None if it has none."""
    return setting_of(task, ATTRIBUTE)


def limits_by_job(jobs):
    """{job id: ConcurrencyLimit or None} for saved jobs with a concurrency key.

    Each task is looked up once. A job whose task no longer imports is let
    through (None): the worker fails it with TaskNotFoundError without calling
    anything.
    """
    tasks = tasks_by_path({job.task_path for job in jobs if job.concurrency_key})
    limits = {path: limit_of(task) for path, task in tasks.items() if task}
    return {job.pk: limits.get(job.task_path) for job in jobs}


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
                "with the task's own arguments and must return a string, a "
                "number or a model instance. Nothing was enqueued."
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


def _check_to(to):
    if isinstance(to, bool) or not isinstance(to, int) or to < 1:
        raise ValueError(
            f"@limits_concurrency(to=...) must be a positive integer, got {to!r}."
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


def _check_group(group):
    if group is not None and (not isinstance(group, str) or not group):
        raise ValueError(
            f"@limits_concurrency(group=...) must be a non-empty string, got {group!r}."
        )
    return group


def _check_on_conflict(on_conflict):
    if on_conflict not in ON_CONFLICT:
        raise ValueError(
            f"@limits_concurrency(on_conflict=...) must be one of {ON_CONFLICT}, "
            f"got {on_conflict!r}."
        )
    return on_conflict

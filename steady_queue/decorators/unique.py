"""@unique: at most one pending run of a task per key; later enqueues merge or fail."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass

from .concurrency import check_key, key_for_call
from .task_settings import setting_decorator, setting_of

ATTRIBUTE = "_steady_queue_unique"
ON_DUPLICATE = ("merge", "refuse")


@dataclass(frozen=True, slots=True)
class UniqueRuns:
    """The settings of one @unique."""

    key: str | Callable | None = None
    on_duplicate: str = "merge"

    def key_for(self, task, args, kwargs, arguments):
        """The unique key of one call; without a key, its task and arguments.

        ``arguments`` is the call's stored JSON, so equal calls give equal keys.
        """
        if self.key is None:
            encoded = json.dumps(arguments, sort_keys=True, separators=(",", ":"))
            digest = hashlib.sha256(encoded.encode()).hexdigest()
            return f"{task.module_path}/{digest}"
        return key_for_call(None, self.key, task, args, kwargs, kind="unique key")


def unique(*, key=None, on_duplicate="merge"):
    """Keep at most one pending run of the task per key.

    A run is pending until a worker starts it (ready, scheduled or blocked).
    Enqueueing again while one is pending returns the pending run's result
    (``on_duplicate="merge"``) or raises DuplicateTaskError (``"refuse"``);
    either way nothing is written. ``key`` is a string or a callable over the
    task's arguments; without one, calls with equal arguments are duplicates.
    """
    if on_duplicate not in ON_DUPLICATE:
        raise ValueError(
            f"@unique(on_duplicate=...) must be one of {ON_DUPLICATE}, "
            f"got {on_duplicate!r}."
        )
    settings = UniqueRuns(key=check_key(key, "unique"), on_duplicate=on_duplicate)

    return setting_decorator("unique", ATTRIBUTE, settings)


def unique_of(task):
    """Return the task's UniqueRuns, or None."""
    return setting_of(task, ATTRIBUTE)

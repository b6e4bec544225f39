"""@unique: at most one pending run of a task per key; later enqueues merge or fail."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from .concurrency import check_key, key_for_call
from .task_settings import seconds_setting, setting_decorator, setting_of

ATTRIBUTE = "_steady_queue_unique"
ON_DUPLICATE = ("merge", "refuse", "raise_priority")
# How long a run holds its key: until a worker starts it, or until it ends.
UNTIL = ("started", "finished")


@dataclass(frozen=True, slots=True)
class UniqueRuns:
    """The settings of one @unique."""

    key: str | Callable | None = None
    on_duplicate: str = "merge"
    until: str = "started"
    # Seconds a run holds its key at most, from its enqueue; None: no bound.
    ttl: float | None = None

    @property
    def raises_priority(self):
        """Whether a duplicate with a higher priority raises the pending
        run's priority to its own as it merges."""
        return self.on_duplicate == "raise_priority"

    @property
    def until_finished(self):
        """Whether a run holds its key while it runs, not only while pending."""
        return self.until == "finished"

    def expires_at(self, enqueued_at):
        """When a run enqueued at ``enqueued_at`` stops holding its key
        (``ttl`` after it); None without a ttl."""
        if self.ttl is None:
            return None
        return enqueued_at + timedelta(seconds=self.ttl)

    def key_for(self, task, args, kwargs, arguments):
        """The unique key of one call; without a key, its task and arguments.

        ``arguments`` is the call's stored JSON, so equal calls give equal keys.
        """
        if self.key is None:
            encoded = json.dumps(arguments, sort_keys=True, separators=(",", ":"))
            digest = hashlib.sha256(encoded.encode()).hexdigest()
            return f"{task.module_path}/{digest}"
        return key_for_call(None, self.key, task, args, kwargs, kind="unique key")


def unique(*, key=None, on_duplicate="merge", until="started", ttl=None):
    """Keep at most one pending run of the task per key.

    A run is pending until a worker starts it (ready, scheduled or blocked);
    with ``until="finished"`` it holds its key while it runs too, until it
    ends (succeeded, failed, cancelled or discarded; a retry still holds it).
    Enqueueing again while a run holds the key returns that run's result
    (``on_duplicate="merge"``), the same after giving a pending run the
    duplicate's priority when it is higher (``"raise_priority"``), or raises
    DuplicateTaskError (``"refuse"``); either way no job is written.
    ``ttl`` (a duration) bounds how long a run holds its key from its
    enqueue: after it, an enqueue makes a new run, even beside one still
    pending or running (a run stuck for hours does not hold its key for
    ever). ``key`` is a string or a callable over the
    task's arguments; without one, calls with equal arguments are duplicates.
    """
    if on_duplicate not in ON_DUPLICATE:
        raise ValueError(
            f"@unique(on_duplicate=...) must be one of {ON_DUPLICATE}, "
            f"got {on_duplicate!r}."
        )
    if until not in UNTIL:
        raise ValueError(f"@unique(until=...) must be one of {UNTIL}, got {until!r}.")
    settings = UniqueRuns(
        key=check_key(key, "unique"),
        on_duplicate=on_duplicate,
        until=until,
        ttl=seconds_setting(ttl, "@unique(ttl=...)", allow_none=True),
    )

    return setting_decorator("unique", ATTRIBUTE, settings)


def unique_of(task):
    """Return the task's UniqueRuns, or None."""
    return setting_of(task, ATTRIBUTE)

"""@debounce: a burst of enqueues with one key runs once, after a quiet period."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass

from .concurrency import check_key, key_for_call
from .task_settings import seconds_setting, setting_decorator, setting_of

ATTRIBUTE = "_steady_queue_debounce"
# Keys share steady_queue_unique_keys with @unique's: kept apart by this.
PREFIX = "debounce:"


@dataclass(frozen=True, slots=True)
class Debounce:
    """The settings of one @debounce: seconds of quiet, the key, the longest
    a burst may put its run off (None: no bound)."""

    quiet: float
    key: str | Callable | None = None
    max_wait: float | None = None

    def key_for(self, task, args, kwargs, arguments):
        """A call's debounce key; without a key, its task and arguments."""
        if self.key is None:
            encoded = json.dumps(arguments, sort_keys=True, separators=(",", ":"))
            digest = hashlib.sha256(encoded.encode()).hexdigest()
            return f"{PREFIX}{task.module_path}/{digest}"
        key = key_for_call(None, self.key, task, args, kwargs, kind="debounce key")
        return f"{PREFIX}{key}"


def debounce(quiet, *, key=None, max_wait=None):
    """Run the task once per burst of enqueues with one key: ``quiet`` after
    the burst's last enqueue (a duration: seconds, a timedelta, "1s"), and
    with ``max_wait`` no later than that long after its first.

    The run takes the first call's arguments: the key says what the work is,
    and a later call adds nothing but time. An enqueue returns the burst's
    run (its result id). An enqueue after the run was dispatched (ready,
    running) starts a new burst, run after the one in progress. ``key``
    works as for @unique: a string or a callable over the task's arguments.
    Stack it with ``@task`` in either order; not with @unique.
    """
    settings = Debounce(
        quiet=seconds_setting(quiet, "@debounce(quiet)"),
        key=check_key(key, "debounce"),
        max_wait=seconds_setting(max_wait, "@debounce(max_wait=...)", allow_none=True),
    )
    return setting_decorator("debounce", ATTRIBUTE, settings)


def debounce_of(task):
    """Return the task's Debounce, or None."""
    return setting_of(task, ATTRIBUTE)

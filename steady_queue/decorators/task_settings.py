"""Per-task settings that steady_queue's decorators leave on a task's function.

They are set on the function rather than on the Task, so a decorator works
stacked above or below ``@task``, and every ``Task.using()`` copy (which shares
the function) keeps them.
"""

import math
from datetime import timedelta

from ..compat import TASK_TYPES
from ..durations import FORMS, parse_duration


def setting_decorator(name, attribute, value):
    """A decorator that records ``value`` under ``attribute`` on a task's function.

    ``name`` is the decorator's name, for the error when it is misapplied.
    """

    def decorate(target):
        function = target.func if isinstance(target, TASK_TYPES) else target
        if not callable(function):
            raise TypeError(f"@{name} decorates a task or a function, not {target!r}.")
        setattr(function, attribute, value)
        return target

    return decorate


def stacking_decorator(name, attribute, value, check=None):
    """A decorator that adds ``value`` to the tuple under ``attribute``.

    Stacked, the decorator nearest the top comes first. ``check(value,
    earlier)`` may raise to refuse a value beside the ones already there.
    """

    def decorate(target):
        function = target.func if isinstance(target, TASK_TYPES) else target
        if not callable(function):
            raise TypeError(f"@{name} decorates a task or a function, not {target!r}.")
        earlier = getattr(function, attribute, ())
        if check is not None:
            check(value, earlier)
        setattr(function, attribute, (value, *earlier))
        return target

    return decorate


def setting_of(task, attribute, default=None):
    """The value a decorator recorded on this task, or ``default``."""
    return getattr(task.func, attribute, default)


def seconds_setting(value, name, *, allow_zero=False, allow_none=False):
    """Check a decorator's duration once for all: float seconds, or None.

    Takes what durations.FORMS says (and None when ``allow_none``).
    Raises TypeError for anything else and ValueError for a duration that is
    not finite or not above zero (zero passes with ``allow_zero``); each
    message names the setting, ``name``, as the user wrote it.
    """
    if value is None and allow_none:
        return None
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, str):
        try:
            value = parse_duration(value)
        except ValueError as error:
            raise ValueError(f"{name}: {error}") from None
    accepted = FORMS + (", or None" if allow_none else "")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be {accepted}; got {value!r}.")
    lowest = "zero or more" if allow_zero else "greater than zero"
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise ValueError(
            f"{name} must be a positive, finite duration ({lowest}); got {value!r}."
        )
    return float(value)

"""@retry: run a failed task again, after a wait, up to a number of attempts."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from django.utils.module_loading import import_string

from .task_settings import seconds_setting, setting_decorator, setting_of

ATTRIBUTE = "_steady_queue_retry"


@dataclass(frozen=True, slots=True)
class Fixed:
    """Wait the same number of seconds before every new attempt."""

    seconds: float

    def __call__(self, attempt, exception_class):
        return self.seconds


@dataclass(frozen=True, slots=True)
class Exponential:
    """Wait ``first * factor ** (attempt - 1)`` seconds, capped, with jitter.

    ``jitter`` spreads each wait by up to that fraction either way, so jobs
    that failed together (an outage) do not all come back at the same second.
    """

    first: float = 1.0
    factor: float = 2.0
    maximum: float = 3600.0
    jitter: float = 0.15

    def __call__(self, attempt, exception_class):
        wait = min(self.maximum, self.first * self.factor ** (attempt - 1))
        return wait * (1 + random.uniform(-self.jitter, self.jitter))


def fixed(seconds):
    """A wait of ``seconds`` between attempts."""
    return Fixed(seconds_setting(seconds, "fixed(seconds)", allow_zero=True))


def exponential(first=1.0, factor=2.0, maximum=3600.0, jitter=0.15):
    """Waits that grow: ``first``, ``first * factor``, ... up to ``maximum``."""
    if not 0 <= jitter < 1:
        raise ValueError(f"exponential(jitter=...) must be in [0, 1), got {jitter!r}.")
    if factor < 1:
        raise ValueError(f"exponential(factor=...) must be >= 1, got {factor!r}.")
    return Exponential(
        first=seconds_setting(first, "exponential(first)"),
        factor=factor,
        maximum=seconds_setting(maximum, "exponential(maximum)"),
        jitter=jitter,
    )


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How many attempts a task gets, for which errors, and the wait between."""

    attempts: int = 1
    on: tuple[type[BaseException], ...] = (Exception,)
    discard_on: tuple[type[BaseException], ...] = ()
    wait: Callable = Exponential()

    def wait_before(self, attempt, exception_class):
        """Seconds to wait after failed attempt number ``attempt``; None: give up.

        ``exception_class`` is the class of the error the attempt ended with
        (for a killed worker, steady_queue.exceptions.ProcessExitError).
        """
        if attempt >= self.attempts or exception_class is None:
            return None
        if issubclass(exception_class, self.discard_on):
            return None
        if not issubclass(exception_class, self.on):
            return None
        wait = self.wait(attempt, exception_class)
        if isinstance(wait, timedelta):
            wait = wait.total_seconds()
        return max(0.0, float(wait))


NO_RETRIES = RetryPolicy()


def retry(attempts=3, *, on=(Exception,), discard_on=(), wait=None):
    """Run the task up to ``attempts`` times in all while it raises ``on``.

    ``wait`` is seconds (a fixed wait), ``fixed(s)``, ``exponential(...)``
    (the default: 1 s, 2 s, 4 s ... with 15 % jitter) or a callable
    ``(attempt, exception_class) -> seconds``. Exceptions in ``discard_on`` are
    never retried. A retried job keeps its id; its result lists every
    attempt's error. Stack it above or below ``@task``.
    """
    policy = RetryPolicy(
        attempts=_attempts(attempts),
        on=_exception_classes(on, "on"),
        discard_on=_exception_classes(discard_on, "discard_on"),
        wait=_wait(wait),
    )

    return setting_decorator("retry", ATTRIBUTE, policy)


def policy_from_options(raw, where, errors):
    """Read OPTIONS["retry"] (a project-wide default) into a RetryPolicy."""
    if not isinstance(raw, dict):
        errors.append(f"{where} must be a dict like {{'attempts': 3}}, got {raw!r}.")
        return None
    accepted = {"attempts", "on", "discard_on", "wait", "backoff", "maximum_wait"}
    unknown = sorted(set(raw) - accepted)
    if unknown:
        errors.append(
            f"{where} has unknown key(s) {', '.join(map(repr, unknown))}; accepted: "
            f"{', '.join(sorted(accepted))}."
        )
        return None
    try:
        backoff = raw.get("backoff", "exponential")
        seconds = raw.get("wait", 1.0)
        if backoff == "fixed":
            wait = fixed(seconds)
        elif backoff == "exponential":
            wait = exponential(first=seconds, maximum=raw.get("maximum_wait", 3600.0))
        else:
            raise ValueError(
                f"'backoff' must be 'fixed' or 'exponential', got {backoff!r}"
            )
        return RetryPolicy(
            attempts=_attempts(raw.get("attempts", 1)),
            on=_exception_classes(raw.get("on", ["builtins.Exception"]), "on"),
            discard_on=_exception_classes(raw.get("discard_on", []), "discard_on"),
            wait=wait,
        )
    except (TypeError, ValueError, ImportError) as error:
        errors.append(f"{where}: {error}")
        return None


def policy_of(task):
    """The task's own @retry policy, or None."""
    return setting_of(task, ATTRIBUTE)


def policy_for(task, default):
    """The policy a failed run is judged by: its task's, else ``default``
    (its backend's OPTIONS["retry"], or None for no retries).

    ``task`` is None for a job whose task could not be loaded: there is
    nothing to run again.
    """
    if task is None:
        return NO_RETRIES
    return policy_of(task) or default or NO_RETRIES


def _attempts(attempts):
    if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
        raise ValueError(
            f"'attempts' must be a positive integer (the first run counts), "
            f"got {attempts!r}."
        )
    return attempts


def _exception_classes(value, name):
    if isinstance(value, type | str):
        value = (value,)
    classes = []
    for item in value:
        if isinstance(item, str):
            item = import_string(item)
        if not (isinstance(item, type) and issubclass(item, BaseException)):
            raise TypeError(
                f"'{name}' must list exception classes (or their dotted paths), "
                f"got {item!r}."
            )
        classes.append(item)
    return tuple(classes)


def _wait(wait):
    if wait is None:
        return Exponential()
    if isinstance(wait, int | float | timedelta) and not isinstance(wait, bool):
        seconds = wait.total_seconds() if isinstance(wait, timedelta) else wait
        return fixed(seconds)
    if callable(wait):
        return wait
    raise TypeError(
        "'wait' must be seconds, a timedelta, fixed(...), exponential(...) or a "
        f"callable (attempt, exception_class) -> seconds; got {wait!r}."
    )

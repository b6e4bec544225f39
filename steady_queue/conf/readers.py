"""How each OPTIONS value is read: one reader per kind of value, each
appending a message that names the value's full path to ``errors``.

A reader returns the value as the Options dataclasses hold it, or None when
it appended an error.
"""

from __future__ import annotations

import difflib
import math
from datetime import timedelta

from django.conf import settings

from ..decorators.retries import policy_from_options
from ..durations import FORMS, parse_duration
from ..schedules.specs import RecurringSpec
from ..tracing import installed as opentelemetry_installed
from .options import (
    MODES,
    DispatcherConfig,
    SchedulerConfig,
    StateMachinesConfig,
    WorkerConfig,
)

# The longest duration accepted: ten years. Longer waits overflow the timers
# processes sleep on (threading.TIMEOUT_MAX) and the dates computed from them.
MAX_SECONDS = 10 * 365 * 86400


def _duration(value, where, errors, *, allow_zero=False):
    """A finite duration in range, as seconds; None if not.

    Takes what durations.FORMS says: seconds, a timedelta, or "30m" and the like.
    """
    if isinstance(value, timedelta):
        value = value.total_seconds()
    lowest = "zero or more" if allow_zero else "greater than zero"
    accepted = f"{lowest} and at most {MAX_SECONDS:,} seconds (ten years)"
    if isinstance(value, str):
        try:
            value = parse_duration(value)
        except ValueError as error:
            errors.append(f"{where}: {error}")
            return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        errors.append(f"{where} must be {FORMS}, {accepted}; got {value!r}.")
        return None
    if not math.isfinite(value):
        errors.append(
            f"{where} must be {accepted}; got {value!r}, which is not a finite number."
        )
        return None
    if value < 0 or (value == 0 and not allow_zero) or value > MAX_SECONDS:
        errors.append(f"{where} must be {accepted}; got {value!r}.")
        return None
    return float(value)


def _positive_int(value, where, errors):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        errors.append(f"{where} must be a whole number of at least 1, got {value!r}.")
        return None
    return value


def _boolean(value, where, errors):
    if not isinstance(value, bool):
        errors.append(f"{where} must be True or False, got {value!r}.")
        return None
    return value


def unknown_keys(given, accepted, where, errors):
    for key in sorted(set(given) - set(accepted), key=str):
        close = difflib.get_close_matches(str(key), [str(a) for a in accepted], n=1)
        guess = f" (did you mean {close[0]!r}?)" if close else ""
        errors.append(
            f"{where} has an unknown key {key!r}{guess}; accepted keys are: "
            f"{', '.join(sorted(accepted))}."
        )


def _queues(value, where, errors):
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple) or not value:
        errors.append(f"{where} must be a queue name or a non-empty list of them.")
        return None
    for name in value:
        if not isinstance(name, str) or not name.removeprefix("!"):
            errors.append(
                f"{where} contains {name!r}; queue names are non-empty strings "
                "('!name' leaves a queue out)."
            )
            return None
        if "*" in name.removeprefix("!")[:-1]:
            errors.append(
                f"{where} contains {name!r}; '*' is allowed alone or as a suffix "
                "(e.g. 'reports*', '!reports*')."
            )
            return None
    return tuple(value)


def _megabytes(value, where, errors):
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        errors.append(
            f"{where} must be a number of megabytes greater than zero and finite, "
            f"or None for no limit; got {value!r}."
        )
        return None
    return value


_WORKER_READERS = {
    "queues": _queues,
    "threads": _positive_int,
    "processes": _positive_int,
    "polling_interval": _duration,
    "max_tasks": lambda v, w, e: None if v is None else _positive_int(v, w, e),
    "max_memory_mb": lambda v, w, e: None if v is None else _megabytes(v, w, e),
    "claim_ahead": _boolean,
    "inline_short_jobs": _boolean,
}

_DISPATCHER_READERS = {
    "polling_interval": _duration,
    "batch_size": _positive_int,
    "concurrency_maintenance_interval": _duration,
}


def _model_labels(value, where, errors):
    if isinstance(value, str):
        value = [value]
    if (
        not isinstance(value, list | tuple)
        or not value
        or not all(
            isinstance(label, str) and (label == "*" or label.count(".") == 1)
            for label in value
        )
    ):
        errors.append(
            f"{where} must be '*' or a list of model labels such as "
            f"'blog.Post', got {value!r}."
        )
        return None
    return tuple(value)


_STATE_MACHINES_READERS = {
    "models": _model_labels,
    "threads": _positive_int,
    "processes": _positive_int,
    "batch_size": _positive_int,
    "polling_interval": _duration,
    "lease": _duration,
}


def _entries(value, where, readers, cls, errors):
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list | tuple):
        errors.append(f"{where} must be a list of dicts, got {value!r}.")
        return None
    entries = (
        _section(entry, f"{where}[{index}]", readers, cls, errors)
        for index, entry in enumerate(value)
    )
    return tuple(entry for entry in entries if entry is not None)


def _section(entry, where, readers, cls, errors, **fixed):
    """Read one dict of settings into ``cls``; None if it is not a dict."""
    if not isinstance(entry, dict):
        errors.append(f"{where} must be a dict, got {entry!r}.")
        return None
    unknown_keys(entry, readers, where, errors)
    kwargs = dict(fixed)
    for key, reader in readers.items():
        if key in entry:
            parsed = reader(entry[key], f"{where}[{key!r}]", errors)
            if parsed is not None:
                kwargs[key] = parsed
    return cls(**kwargs)


def _text(value, where, errors):
    if not isinstance(value, str):
        errors.append(f"{where} must be a string, got {value!r}.")
        return None
    return value


def _required_text(value, where, errors):
    if not isinstance(value, str) or not value.strip():
        errors.append(f"{where} must be a non-empty string, got {value!r}.")
        return None
    return value


def _optional(reader):
    """Accept None (the default) as well as what ``reader`` accepts."""
    return lambda value, where, errors: (
        None if value is None else reader(value, where, errors)
    )


def _integer(value, where, errors):
    if isinstance(value, bool) or not isinstance(value, int):
        errors.append(f"{where} must be a whole number, got {value!r}.")
        return None
    return value


def _list(value, where, errors):
    if not isinstance(value, list | tuple):
        errors.append(f"{where} must be a list of arguments, got {value!r}.")
        return None
    return tuple(value)


def _mapping(value, where, errors):
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        errors.append(f"{where} must be a dict of keyword arguments, got {value!r}.")
        return None
    return dict(value)


_SCHEDULER_READERS = {"polling_interval": _duration, "dynamic_tasks": _boolean}

_RECURRING_READERS = {
    "task": _required_text,
    "schedule": _required_text,
    "args": _list,
    "kwargs": _mapping,
    "queue_name": _optional(_text),
    "priority": _optional(_integer),
    "timezone": _optional(_text),
    "description": _text,
    "missed": _text,
}


def _recurring(value, where, errors):
    """Read OPTIONS["recurring"]: {key: {"task": path, "schedule": ...}}."""
    if not isinstance(value, dict):
        errors.append(
            f"{where} must be a dict of recurring tasks by key, got {value!r}."
        )
        return None
    entries = []
    for key, entry in value.items():
        entry_where = f"{where}[{key!r}]"
        if not isinstance(key, str) or not key:
            errors.append(f"{entry_where}: a recurring task's key must be a string.")
            continue
        missing = [
            name
            for name in ("task", "schedule")
            if isinstance(entry, dict) and name not in entry
        ]
        if missing:
            errors.append(
                f"{entry_where} needs {' and '.join(map(repr, missing))}, e.g. "
                "{'task': 'myapp.tasks.cleanup', 'schedule': 'every hour'}."
            )
            continue
        read = _section(entry, entry_where, _RECURRING_READERS, dict, errors)
        # An entry without a task or schedule is left out: the errors name it.
        if read is not None and "task" in read and "schedule" in read:
            entries.append(RecurringSpec(key=key, origin=entry_where, **read))
    return tuple(entries)


def _mode(value, where, errors):
    if value not in MODES:
        errors.append(f"{where} must be one of {', '.join(MODES)}; got {value!r}.")
        return None
    return value


def _file_path(value, where, errors):
    if value is not None and not isinstance(value, str):
        errors.append(f"{where} must be a file path or None, got {value!r}.")
        return None
    return value


def _opentelemetry(value, where, errors):
    """Tracing on needs opentelemetry-api: say so at startup, not at a span."""
    enabled = _boolean(value, where, errors)
    if enabled and not opentelemetry_installed():
        errors.append(
            f"{where} is True, but opentelemetry-api is not installed. Install "
            "the extra (pip install 'django-steady-queue[otel]'), or set it "
            "to False."
        )
        return None
    return enabled


def _prepared_statements(value, where, errors):
    if not isinstance(value, bool) and value != "auto":
        errors.append(
            f'{where} must be True, False or "auto" (prepare where the '
            f"connection reaches PostgreSQL itself), got {value!r}."
        )
        return None
    return value


def _database(value, where, errors):
    if not isinstance(value, str) or value not in settings.DATABASES:
        errors.append(
            f"{where} names the database {value!r}, which is not in DATABASES "
            f"(known aliases: {', '.join(sorted(settings.DATABASES))})."
        )
        return None
    return value


READERS = {
    "database": _database,
    "workers": lambda v, w, e: _entries(v, w, _WORKER_READERS, WorkerConfig, e),
    "dispatchers": lambda v, w, e: _entries(
        v, w, _DISPATCHER_READERS, DispatcherConfig, e
    ),
    "state_machines": lambda v, w, e: _entries(
        v, w, _STATE_MACHINES_READERS, StateMachinesConfig, e
    ),
    "preserve_finished_jobs": _boolean,
    "clear_finished_jobs_after": _duration,
    "clear_finished_jobs_schedule": _optional(_text),
    "event_retention": _duration,
    "process_heartbeat_interval": _duration,
    "process_alive_threshold": _duration,
    "shutdown_timeout": lambda v, w, e: _duration(v, w, e, allow_zero=True),
    "supervisor_pidfile": _file_path,
    "liveness_file": _file_path,
    "opentelemetry": _opentelemetry,
    "mode": _mode,
    "listen_notify": _boolean,
    "local_wakeup": _boolean,
    "listen_database": _optional(_database),
    "prepared_statements": _prepared_statements,
    "timeout": lambda v, w, e: None if v is None else _duration(v, w, e),
    "concurrency_duration": _duration,
    "priority_aging": _optional(_duration),
    "retry": lambda v, w, e: _retry_policy(v, w, e),
    "metrics_label_limit": _positive_int,
    "max_argument_bytes": _positive_int,
    "handback_delay": _duration,
    "handback_grace": lambda v, w, e: _duration(v, w, e, allow_zero=True),
    "scheduler": lambda v, w, e: _section(v, w, _SCHEDULER_READERS, SchedulerConfig, e),
    "recurring": _recurring,
}

# The numbers of OPTIONS["retry"], read here so that each error names its key.
_RETRY_NUMBERS = {
    "attempts": _positive_int,
    "wait": lambda v, w, e: _duration(v, w, e, allow_zero=True),
    "maximum_wait": _duration,
}


def _retry_policy(value, where, errors):
    if isinstance(value, dict):
        value = dict(value)
        found = len(errors)
        for key, reader in _RETRY_NUMBERS.items():
            if key in value:
                value[key] = reader(value[key], f"{where}[{key!r}]", errors)
        if len(errors) > found:
            return None
    return policy_from_options(value, where, errors)

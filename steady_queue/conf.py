"""Backend OPTIONS, read into frozen dataclasses and validated with clear messages."""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass
from datetime import timedelta

from django.core.exceptions import ImproperlyConfigured

from .durations import FORMS, parse_duration
from .recurring.specs import RecurringSpec

MODES = ("fork", "thread")


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerConfig:
    """One entry of OPTIONS["workers"]: which queues, how many threads and forks."""

    queues: tuple[str, ...] = ("*",)
    threads: int = 3
    processes: int = 1
    polling_interval: float = 0.1
    # Recycling: replace the worker after this many jobs, or once its memory
    # (RSS, in MB) is over this after a job. None: never.
    max_tasks: int | None = None
    max_memory_mb: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DispatcherConfig:
    """One entry of OPTIONS["dispatchers"]: how often and how much to dispatch."""

    polling_interval: float = 1.0
    batch_size: int = 500
    concurrency_maintenance_interval: float = 600.0


@dataclass(frozen=True, slots=True, kw_only=True)
class StateMachinesConfig:
    """One entry of OPTIONS["state_machines"]: which StatorModels to advance,
    with how many threads and processes, and how long a row's lease lasts."""

    models: tuple[str, ...] = ("*",)
    threads: int = 3
    processes: int = 1
    batch_size: int = 100
    polling_interval: float = 1.0
    lease: float = 300.0


@dataclass(frozen=True, slots=True, kw_only=True)
class SchedulerConfig:
    """OPTIONS["scheduler"]: how often to reload recurring tasks, and which."""

    polling_interval: float = 1.0
    # Whether tasks added at runtime (schedule_recurring_task) are run.
    dynamic_tasks: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Options:
    """Every setting a SteadyQueueBackend reads from its OPTIONS."""

    database: str = "default"
    workers: tuple[WorkerConfig, ...] = (WorkerConfig(),)
    dispatchers: tuple[DispatcherConfig, ...] = (DispatcherConfig(),)
    # Run only where the project has StatorModels (statemachines.runnable_models).
    state_machines: tuple[StateMachinesConfig, ...] = (StateMachinesConfig(),)
    preserve_finished_jobs: bool = True
    clear_finished_jobs_after: float = 86400.0
    # A schedule ("every hour") on which the scheduler clears finished jobs
    # older than clear_finished_jobs_after; None: never (run the command).
    clear_finished_jobs_schedule: str | None = None
    process_heartbeat_interval: float = 60.0
    process_alive_threshold: float = 300.0
    shutdown_timeout: float = 5.0
    supervisor_pidfile: str | None = None
    mode: str = "fork"
    listen_notify: bool = True
    # The DATABASES alias the workers' LISTEN connections use, when "database"
    # reaches PostgreSQL through a pooler in transaction mode (a LISTEN there
    # hears nothing); None: "database" itself.
    listen_database: str | None = None
    # Seconds one run of a task may take unless it has its own @timeout; None: no
    # limit.
    timeout: float | None = None
    # How long a concurrency slot may stay taken when its holder dies without
    # giving it back (@limits_concurrency's duration, where it sets none).
    concurrency_duration: float = 180.0
    # The retry policy of tasks without @retry (None: one attempt, no retries).
    retry: object = None
    # The metrics give at most this many queues, and this many tasks, their
    # own label; the rest are summed under "other" (reporting.metrics).
    metrics_label_limit: int = 50
    scheduler: SchedulerConfig = SchedulerConfig()
    recurring: tuple[RecurringSpec, ...] = ()
    # The TASKS alias these options were read for (set by read_options).
    alias: str = "default"


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


def _unknown_keys(given, accepted, where, errors):
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
    _unknown_keys(entry, readers, where, errors)
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


def _pidfile(value, where, errors):
    if value is not None and not isinstance(value, str):
        errors.append(f"{where} must be a file path or None, got {value!r}.")
        return None
    return value


def _database(value, where, errors):
    from django.conf import settings

    if not isinstance(value, str) or value not in settings.DATABASES:
        errors.append(
            f"{where} names the database {value!r}, which is not in DATABASES "
            f"(known aliases: {', '.join(sorted(settings.DATABASES))})."
        )
        return None
    return value


_READERS = {
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
    "process_heartbeat_interval": _duration,
    "process_alive_threshold": _duration,
    "shutdown_timeout": lambda v, w, e: _duration(v, w, e, allow_zero=True),
    "supervisor_pidfile": _pidfile,
    "mode": _mode,
    "listen_notify": _boolean,
    "listen_database": _optional(_database),
    "timeout": lambda v, w, e: None if v is None else _duration(v, w, e),
    "concurrency_duration": _duration,
    "retry": lambda v, w, e: _retry_policy(v, w, e),
    "metrics_label_limit": _positive_int,
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
    from .decorators.retries import policy_from_options

    if isinstance(value, dict):
        value = dict(value)
        found = len(errors)
        for key, reader in _RETRY_NUMBERS.items():
            if key in value:
                value[key] = reader(value[key], f"{where}[{key!r}]", errors)
        if len(errors) > found:
            return None
    return policy_from_options(value, where, errors)


def _listen_database_is_postgresql(options, where, errors):
    """LISTEN exists only on PostgreSQL: both databases must be PostgreSQL."""
    from django.conf import settings

    if options.listen_database is None:
        return
    engines = {
        name: settings.DATABASES[name].get("ENGINE", "")
        for name in (options.database, options.listen_database)
    }
    others = {name: e for name, e in engines.items() if "postgresql" not in e}
    if others:
        named = ", ".join(f"{name!r} ({engine})" for name, engine in others.items())
        errors.append(
            f"{where}['listen_database'] is for PostgreSQL, whose workers LISTEN "
            f"for new jobs; {named} is not PostgreSQL. Remove 'listen_database'."
        )


def read_options(raw, alias="default"):
    """Return (Options, errors): the parsed options and a message per problem."""
    errors: list[str] = []
    where = f"TASKS[{alias!r}]['OPTIONS']"
    if not isinstance(raw, dict):
        return Options(), [f"{where} must be a dict, got {raw!r}."]
    _unknown_keys(raw, _READERS, where, errors)
    kwargs = {}
    for key, reader in _READERS.items():
        if key in raw:
            parsed = reader(raw[key], f"{where}[{key!r}]", errors)
            if parsed is not None:
                kwargs[key] = parsed
    options = Options(**kwargs, alias=alias)
    _listen_database_is_postgresql(options, where, errors)
    if options.process_alive_threshold <= options.process_heartbeat_interval:
        errors.append(
            f"{where}['process_alive_threshold'] ({options.process_alive_threshold}s)"
            " must be longer than 'process_heartbeat_interval' "
            f"({options.process_heartbeat_interval}s), or live processes get pruned."
        )
    return options, errors


def parse_options(raw, alias="default"):
    """Return Options, or raise ImproperlyConfigured listing every problem."""
    options, errors = read_options(raw, alias)
    if errors:
        raise ImproperlyConfigured("\n".join(errors))
    return options


def options_of_backend(alias):
    """The parsed OPTIONS of the steady_queue backend called ``alias``.

    None when ``TASKS`` has no such alias or it names another kind of backend:
    a job keeps the alias it was enqueued under, which a later deploy may have
    removed. A steady_queue backend whose OPTIONS are wrong raises
    ImproperlyConfigured, as it does everywhere else.
    """
    from django.conf import settings

    from .backend import SteadyQueueBackend
    from .compat import task_backends

    if alias not in getattr(settings, "TASKS", {}):
        return None
    backend = task_backends[alias]
    if not isinstance(backend, SteadyQueueBackend):
        return None
    return backend.config

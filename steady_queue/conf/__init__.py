"""Backend OPTIONS, read into frozen dataclasses and validated with clear messages.

options.py says what the OPTIONS hold, readers.py how each value is read;
here they are read as a whole, and found again for a backend alias.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from ..compat import task_backends
from .options import (
    MODES,
    DispatcherConfig,
    Options,
    SchedulerConfig,
    StateMachinesConfig,
    WorkerConfig,
)
from .readers import MAX_SECONDS, READERS, unknown_keys

__all__ = [
    "MAX_SECONDS",
    "MODES",
    "DispatcherConfig",
    "Options",
    "SchedulerConfig",
    "StateMachinesConfig",
    "WorkerConfig",
    "options_of_backend",
    "parse_options",
    "read_options",
]


def _listen_database_is_postgresql(options, where, errors):
    """LISTEN exists only on PostgreSQL: both databases must be PostgreSQL."""
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
    unknown_keys(raw, READERS, where, errors)
    kwargs = {}
    for key, reader in READERS.items():
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
    if alias not in getattr(settings, "TASKS", {}):
        return None
    # A SteadyQueueBackend's config is its Options; other backends have none.
    config = getattr(task_backends[alias], "config", None)
    return config if isinstance(config, Options) else None

"""System checks for a SteadyQueueBackend: app installed, OPTIONS valid, locking."""

from django.apps import apps
from django.core import checks
from django.db import connections

from .compat import FRAMEWORK_APP
from .conf import read_options
from .recurring.checks import check_recurring


def check_backend(backend, databases=None, **kwargs):
    """Return the check messages for one configured backend."""
    messages = []
    if not apps.is_installed("steady_queue"):
        messages.append(
            checks.Error(
                f"TASKS[{backend.alias!r}] uses SteadyQueueBackend, but 'steady_queue' "
                "is not in INSTALLED_APPS.",
                hint="Add 'steady_queue' to INSTALLED_APPS and run migrate.",
                id="steady_queue.E001",
            )
        )
    if FRAMEWORK_APP and not apps.is_installed(FRAMEWORK_APP):
        messages.append(
            checks.Error(
                f"On this Django version the task framework is the '{FRAMEWORK_APP}' "
                "backport, which must be in INSTALLED_APPS.",
                hint=f"Add '{FRAMEWORK_APP}' to INSTALLED_APPS.",
                id="steady_queue.E003",
            )
        )
    options, errors = read_options(backend.options, backend.alias)
    messages.extend(
        checks.Error(
            error,
            hint="See the configuration reference in steady_queue's documentation.",
            id="steady_queue.E002",
        )
        for error in errors
    )
    messages.extend(check_recurring(options))
    if databases and options.database in databases:
        messages.extend(_check_locking(options.database))
    return messages


def _check_locking(alias):
    connection = connections[alias]
    if connection.vendor == "sqlite" or (
        connection.features.has_select_for_update_skip_locked
    ):
        return []
    return [
        checks.Warning(
            f"The database {alias!r} ({connection.display_name}) does not support "
            "SELECT ... FOR UPDATE SKIP LOCKED. Workers will wait on each other's "
            "row locks when claiming jobs, so adding workers adds little throughput.",
            hint="Use PostgreSQL, MySQL 8+ or MariaDB 10.6+.",
            id="steady_queue.W001",
        )
    ]

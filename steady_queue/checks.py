"""System checks for a SteadyQueueBackend: app installed, OPTIONS valid,
migrated, locking, and recurring keys that aliases sharing a database share.

The project-wide ones (the metrics view, state machines, task packages) are
project_checks'.
"""

from django.apps import apps
from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from .compat import FRAMEWORK_APP
from .conf import read_options
from .conf.queue_names import unlisted_worker_queues
from .database_checks import check_liveness, database_warnings
from .migration_state import MIGRATE_HINT, not_migrated_message
from .schedules.checks import check_recurring
from .schedules.specs import static_specs

# Where the hints send people: the documentation's page, by its title and by
# the file that ships in the source distribution (no hosted copy exists yet).
CONFIGURATION_DOCS = (
    "the Configuration page of the documentation (docs/configuration.rst)"
)


INSTALL_HINT = "Add 'steady_queue' to INSTALLED_APPS and run migrate."


def not_installed_message(alias):
    return (
        f"TASKS[{alias!r}] uses SteadyQueueBackend, but 'steady_queue' is not in "
        "INSTALLED_APPS."
    )


def refuse_if_not_installed(alias):
    """Raise ImproperlyConfigured (E001's words) unless the app is installed.

    Django runs a backend's checks only once django.tasks is imported, which
    nothing does at `manage.py check` in a project whose tasks modules load
    later; so every use of the backend asks this first, before its models
    (which need the app) are imported.
    """
    if not apps.is_installed("steady_queue"):
        raise ImproperlyConfigured(f"{not_installed_message(alias)} {INSTALL_HINT}")


def check_backend(backend, steady_queue_databases, **kwargs):
    """Return the check messages for one configured backend, from its settings.

    ``steady_queue_databases`` is {alias: database} of every SteadyQueueBackend
    in TASKS (backend.steady_queue_databases()). What reads the database is
    check_queue_database's: Django asks a task backend's checks without
    databases, and runs its database checks apart (project_checks).
    """
    messages = []
    if not apps.is_installed("steady_queue"):
        messages.append(
            checks.Error(
                not_installed_message(backend.alias),
                hint=INSTALL_HINT,
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
    messages.extend(
        checks.Error(
            error,
            hint=f"QUEUES is described on {CONFIGURATION_DOCS}.",
            id="steady_queue.E020",
        )
        for error in backend.queues_errors
    )
    options, errors = read_options(backend.options, backend.alias)
    messages.extend(
        checks.Error(
            error,
            hint=f"Every option is described on {CONFIGURATION_DOCS}.",
            id="steady_queue.E002",
        )
        for error in errors
    )
    messages.extend(
        checks.Warning(
            warning,
            hint="Add the queue to QUEUES, or correct the worker's queues.",
            id="steady_queue.W006",
        )
        for warning in unlisted_worker_queues(
            backend.queues, options.workers, backend.alias
        )
    )
    messages.extend(check_recurring(options))
    if not errors:
        messages.extend(check_liveness(options, backend.alias))
    messages.extend(
        _check_recurring_keys_not_shared(backend.alias, steady_queue_databases)
    )
    return messages


def check_queue_database(database):
    """The checks that read a queue database: E005, W001, W003, W005, E018."""
    return [*_check_migrated(database), *database_warnings(database)]


def _check_migrated(alias):
    """An error when steady_queue's migrations are not all applied to ``alias``."""
    message = not_migrated_message(alias)
    if message is None:
        return []
    return [checks.Error(message, hint=MIGRATE_HINT, id="steady_queue.E005")]


def _check_recurring_keys_not_shared(alias, databases):
    """An error per recurring key this alias shares with an earlier alias that
    keeps its jobs in the same database.

    Several aliases may share a database, and its table of recurring tasks:
    a key there names one task, run by one alias's scheduler. Reported on the
    later alias, as E015 (a key used more than once).
    """
    database = databases.get(alias)
    sharing = [other for other, db in databases.items() if db == database]
    if alias not in sharing or sharing.index(alias) == 0:
        return []
    keys = _static_keys(alias)
    messages = []
    for other in sharing[: sharing.index(alias)]:
        for key in sorted(keys & _static_keys(other)):
            messages.append(
                checks.Error(
                    f"The recurring task key {key!r} is declared for "
                    f"TASKS[{alias!r}] and TASKS[{other!r}], which keep their "
                    f"jobs in the same database {database!r}: one key names one "
                    "task there, so the aliases' schedulers would overwrite "
                    "each other's.",
                    hint="Give each alias's schedule its own key.",
                    id="steady_queue.E015",
                )
            )
    return messages


def _static_keys(alias):
    """The keys of an alias's static recurring tasks (none if its OPTIONS are
    invalid: E002 reports that)."""
    options, errors = read_options(settings.TASKS[alias].get("OPTIONS") or {}, alias)
    return set() if errors else {spec.key for spec in static_specs(options)}

"""System checks for a SteadyQueueBackend: app installed, OPTIONS valid, locking.

Also the project-wide ones: recurring keys of backend aliases that share a
database, and an open metrics view.
"""

from django.apps import apps
from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import connections
from django.utils.module_loading import import_string

from .compat import FRAMEWORK_APP
from .conf import read_options
from .database_checks import check_liveness
from .dialects import dialect_for
from .recurring.checks import check_recurring

# Where the hints send people: the configuration page of the documentation
# (also in the package's Project-URLs).
CONFIGURATION_DOCS = (
    "https://django-steady-queue.readthedocs.io/en/latest/configuration.html"
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
        raise ImproperlyConfigured(
            f"{not_installed_message(alias)} {INSTALL_HINT} (system check "
            "steady_queue.E001)"
        )


def check_backend(backend, databases=None, **kwargs):
    """Return the check messages for one configured backend."""
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
    options, errors = read_options(backend.options, backend.alias)
    messages.extend(
        checks.Error(
            error,
            hint=f"Every option is described at {CONFIGURATION_DOCS}",
            id="steady_queue.E002",
        )
        for error in errors
    )
    messages.extend(check_recurring(options))
    if not errors:
        messages.extend(check_liveness(options, backend.alias, databases))
    messages.extend(_check_recurring_keys_not_shared(backend.alias))
    if databases and options.database in databases:
        messages.extend(_check_locking(options.database))
        messages.extend(_check_migrated(options.database))
    return messages


def _check_migrated(alias):
    """An error when steady_queue's migrations are not all applied to ``alias``."""
    from .migration_state import MIGRATE_HINT, not_migrated_message

    message = not_migrated_message(alias)
    if message is None:
        return []
    return [checks.Error(message, hint=MIGRATE_HINT, id="steady_queue.E005")]


def _check_locking(alias):
    connection = connections[alias]
    if dialect_for(connection).serialises_writers or (
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


def _check_recurring_keys_not_shared(alias):
    """An error per recurring key this alias shares with an earlier alias that
    keeps its jobs in the same database.

    Several aliases may share a database, and its table of recurring tasks:
    a key there names one task, run by one alias's scheduler. Reported on the
    later alias, as E015 (a key used more than once).
    """
    databases = steady_queue_databases()
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
    from .recurring.specs import static_specs

    options, errors = read_options(settings.TASKS[alias].get("OPTIONS") or {}, alias)
    return set() if errors else {spec.key for spec in static_specs(options)}


def steady_queue_databases():
    """{TASKS alias: database alias} of every SteadyQueueBackend, in TASKS order."""
    from .backend import SteadyQueueBackend

    found = {}
    for alias, config in getattr(settings, "TASKS", {}).items():
        try:
            backend_class = import_string(config["BACKEND"])
        except (ImportError, KeyError, TypeError):
            continue  # the task framework's own checks report it
        if isinstance(backend_class, type) and issubclass(
            backend_class, SteadyQueueBackend
        ):
            options = config.get("OPTIONS") or {}
            database = (
                options.get("database", "default")
                if isinstance(options, dict)
                else None
            )
            # A bad OPTIONS or database is E002's to report, not this check's.
            if isinstance(database, str):
                found[alias] = database
    return found


def check_metrics_token(app_configs=None, **kwargs):
    """Warn when the metrics view is routed and open: no token is configured."""
    from django.urls import get_resolver

    if getattr(settings, "STEADY_QUEUE_METRICS_TOKEN", None):
        return []
    if not getattr(settings, "ROOT_URLCONF", None):
        return []
    if not _routes_metrics(get_resolver().url_patterns):
        return []
    return [
        checks.Warning(
            "steady_queue's metrics view is in the URLconf, and "
            "STEADY_QUEUE_METRICS_TOKEN is not set: anyone who can reach the URL "
            "can read your queue names, sizes and processes.",
            hint=(
                "Set STEADY_QUEUE_METRICS_TOKEN to a long random string (e.g. "
                "from the environment) and give Prometheus the same token as a "
                "bearer token; or remove the route where Prometheus does not "
                "need it."
            ),
            id="steady_queue.W002",
        )
    ]


def check_task_packages(app_configs=None, **kwargs):
    """Error when STEADY_QUEUE_TASK_PACKAGES is not a list of package names."""
    from .pipeline.loader import TASK_PACKAGES_SETTING

    names = getattr(settings, TASK_PACKAGES_SETTING, [])
    if isinstance(names, list | tuple) and all(
        isinstance(name, str)
        and name
        and all(part.isidentifier() for part in name.split("."))
        for name in names
    ):
        return []
    return [
        checks.Error(
            f"settings.{TASK_PACKAGES_SETTING} must be a list of dotted package "
            f"names, like ['modelsearch', 'mylib.jobs']; it is {names!r}.",
            hint=(
                "Name each package whose modules define tasks outside the "
                "installed apps and the project package."
            ),
            id="steady_queue.E007",
        )
    ]


def check_state_handlers(app_configs=None, **kwargs):
    """Error for each state of a StatorModel that should run a handler and has none."""
    from .statemachines.models import runnable_models, states_without_handlers

    return [
        checks.Error(
            f"{state.qualified_name} has no handler: the {model._meta.label} rows "
            "in it would wait there for ever.",
            hint=(
                f"Register one with @{state.qualified_name}.handler in a module "
                "the app imports when it loads (its models.py), or declare the "
                "state terminal=True or externally_progressed=True."
            ),
            obj=model,
            id="steady_queue.E006",
        )
        for model, state in states_without_handlers(runnable_models())
    ]


def _routes_metrics(patterns):
    """Whether these URL patterns (searched through includes) serve the metrics."""
    from .views import metrics

    for pattern in patterns:
        if hasattr(pattern, "url_patterns"):
            if _routes_metrics(pattern.url_patterns):
                return True
            continue
        view = getattr(pattern, "callback", None)
        # Through decorators a project may add (never_cache, csrf_exempt...).
        while view is not None:
            if view is metrics or view is getattr(metrics, "__wrapped__", None):
                return True
            view = getattr(view, "__wrapped__", None)
    return False

"""The project-wide system checks: an open metrics view, states without a
handler, the STEADY_QUEUE_TASK_PACKAGES and STEADY_QUEUE_TASK_MODULES
settings, and how each queue database is set up (registered in apps.ready).

A backend's own checks are checks'.
"""

from django.conf import settings
from django.core import checks
from django.db import connections
from django.urls import get_resolver

from .backend import steady_queue_databases
from .database_checks import database_warnings
from .pipeline.loader import TASK_MODULES_SETTING, TASK_PACKAGES_SETTING
from .statemachines.models import runnable_models, states_without_handlers


def project_messages():
    """The messages of the project-wide checks (``manage.py steady_queue check``
    prints them beside its backend's)."""
    return [
        *check_metrics_token(),
        *check_state_handlers(),
        *check_task_packages(),
    ]


def worker_messages():
    """The project-wide checks a supervisor runs as it starts: those about
    what its processes run (state handlers, task modules); not the metrics
    view's, which would load the whole URLconf for a page workers never
    serve."""
    return [*check_state_handlers(), *check_task_packages()]


def check_metrics_token(app_configs=None, **kwargs):
    """Warn when the metrics view is routed and open: no token is configured."""
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


def check_queue_databases(app_configs=None, databases=None, **kwargs):
    """W001, W003, W005 and E018 for each queue database Django checks, once
    per database.

    Registered with the ``database`` tag: Django runs it where it passes
    databases (``manage.py check --database``, ``migrate``). A task backend's
    own checks never get them (django.tasks asks ``backend.check()`` alone).
    """
    queue_databases = dict.fromkeys(steady_queue_databases().values())
    return [
        message
        for database in queue_databases
        if database in (databases or ()) and database in connections
        for message in database_warnings(database)
    ]


def check_task_packages(app_configs=None, **kwargs):
    """Error when STEADY_QUEUE_TASK_PACKAGES or STEADY_QUEUE_TASK_MODULES is
    not a list of dotted names."""
    return [
        checks.Error(
            f"settings.{setting} must be a list of dotted {kind} names, like "
            f"{example}; it is {names!r}.",
            hint=hint,
            id="steady_queue.E007",
        )
        for setting, kind, example, hint in (
            (
                TASK_PACKAGES_SETTING,
                "package",
                "['modelsearch', 'mylib.jobs']",
                "Name each package, outside the installed apps and the project "
                "package, whose tasks module (or tasks package) defines tasks.",
            ),
            (
                TASK_MODULES_SETTING,
                "module",
                "['shop.emails', 'mylib.jobs.build']",
                "Name each module that defines tasks and is no package's tasks module.",
            ),
        )
        if not _dotted_names(names := getattr(settings, setting, []))
    ]


def _dotted_names(names):
    return isinstance(names, list | tuple) and all(
        isinstance(name, str)
        and name
        and all(part.isidentifier() for part in name.split("."))
        for name in names
    )


def check_state_handlers(app_configs=None, **kwargs):
    """Error for each state of a StatorModel that should run a handler and has none."""
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
    # Imported here: the views (and the reporting they serve) are no part of
    # a supervisor's start, which imports this module for its own checks.
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

"""The steady_queue Django app."""

from django.apps import AppConfig
from django.core import checks
from django.utils.translation import gettext_lazy as _

from .collector import collector_paused


class SteadyQueueConfig(AppConfig):
    name = "steady_queue"
    verbose_name = _("Steady Queue")
    default_auto_field = "django.db.models.BigAutoField"

    def import_models(self):
        # Our models load Django's database backend and its driver (psycopg
        # on PostgreSQL): a third of what a worker's boot allocates, none of
        # it cyclic garbage. The collector's young passes over it would
        # otherwise add up to its first full collection, which walks every
        # object loaded so far (40 ms of a supervisor's 0.95 s of CPU on a
        # 2-core VM), before the supervisor freezes them all as it forks.
        with collector_paused():
            super().import_models()

    def ready(self):
        # Importing the framework registers its system checks (django.tasks does
        # that on import); without it `manage.py check` skips our backend checks.
        from . import compat, log  # noqa: F401 - also connects the log receivers

        # The project checks read the URLconf and the state machines' models:
        # imported once the app registry is ready.
        from .project_checks import (
            check_metrics_token,
            check_queue_databases,
            check_state_handlers,
            check_task_packages,
        )

        checks.register(check_metrics_token, checks.Tags.security, checks.Tags.urls)
        checks.register(check_state_handlers, checks.Tags.models)
        checks.register(check_task_packages)
        # Reads the databases: run where Django passes them (check --database,
        # migrate), as the backend's own checks never are.
        checks.register(check_queue_databases, checks.Tags.database)

        # STEADY_QUEUE_EMBEDDED_RUNSERVER: workers inside runserver's serving
        # process. The supervisor and its processes are imported there only,
        # once the models are loaded: every other process skips them.
        from .embedded.runserver import start_if_serving

        start_if_serving()

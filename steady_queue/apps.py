"""The steady_queue Django app."""

from django.apps import AppConfig


class SteadyQueueConfig(AppConfig):
    name = "steady_queue"
    verbose_name = "Steady Queue"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from . import log  # noqa: F401 - connects the log receivers

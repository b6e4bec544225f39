"""Dashboard: a proxy of Job with no rows of its own, so the admin index lists
the dashboard under Steady Queue next to the models."""

from django.utils.translation import gettext_lazy as _

from .job import Job


class Dashboard(Job):
    class Meta:
        proxy = True
        app_label = "steady_queue"
        verbose_name = _("dashboard")
        verbose_name_plural = _("dashboard")
        # Looking needs view_job, as the dashboard itself does.
        default_permissions = ()

"""The processes admin: kind, host, pid, heartbeat and the jobs each is running."""

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html_join
from django.utils.translation import gettext_lazy as _

from ..models import Process
from .base import ReadOnlyAdmin, moment_field


@admin.register(Process)
class ProcessAdmin(ReadOnlyAdmin, admin.ModelAdmin):
    list_display = (
        "name",
        "kind",
        "hostname",
        "pid",
        "code_version",
        "last_heartbeat",
        "running",
    )
    list_filter = ("kind", "hostname", "code_version")
    search_fields = ("name", "hostname")
    ordering = ("kind", "name")
    readonly_fields = (
        "kind",
        "name",
        "pid",
        "hostname",
        "code_version",
        "supervisor_id",
        "metadata",
        "last_heartbeat",
        "started",
        "running",
    )
    last_heartbeat = moment_field("last_heartbeat_at", _("last heartbeat"))
    started = moment_field("created_at", _("started"))

    @admin.display(description=_("running"))
    def running(self, process):
        # A query per row: a deployment has tens of processes, not thousands.
        single = Process.objects.using(process._state.db).filter(pk=process.pk)
        jobs = single.running_jobs().get(process.pk, [])
        if not jobs:
            return "-"
        return format_html_join(
            ", ",
            '<a href="{}">{} #{}</a>',
            (
                (
                    reverse("admin:steady_queue_job_change", args=[job_id]),
                    task_path.rpartition(".")[2],
                    job_id,
                )
                for job_id, task_path, _ in jobs
            ),
        )

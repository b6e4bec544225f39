"""The recurring tasks admin: schedule, last and next run, and "run now"."""

from django.contrib import admin, messages
from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from ..models import RecurringTask
from ..reporting.moments import moment_html
from ..schedules.schedule import ScheduleError
from .base import ReadOnlyAdmin, can, moment_field


@admin.action(
    permissions=["run_now"], description=_("Run selected recurring tasks now")
)
def run_recurring_now(modeladmin, request, queryset):
    for task in queryset:
        result = task.enqueue_now()
        modeladmin.message_user(
            request,
            gettext("Enqueued %(key)s as job %(job)s.")
            % {"key": task.key, "job": result.id},
            messages.SUCCESS,
        )


@admin.register(RecurringTask)
class RecurringTaskAdmin(ReadOnlyAdmin, admin.ModelAdmin):
    list_display = (
        "key",
        "schedule",
        "task_path",
        "queue_name",
        "last_run_at",
        "next_run_at",
        "static",
    )
    list_filter = ("static", "backend_name")
    search_fields = ("key", "task_path")
    ordering = ("key",)
    actions = (run_recurring_now,)
    readonly_fields = (
        "key",
        "schedule",
        "timezone",
        "task_path",
        "arguments",
        "queue_name",
        "priority",
        "missed",
        "static",
        "backend_name",
        "description",
        "last_run_at",
        "next_run_at",
        "created",
        "updated",
    )
    created = moment_field("created_at", _("created"))
    updated = moment_field("updated_at", _("updated"))

    def get_queryset(self, request):
        return super().get_queryset(request).with_last_run_at()

    def has_run_now_permission(self, request):
        return can(request, "run_job_now")

    @admin.display(description=_("last run"))
    def last_run_at(self, task):
        return moment_html(task.last_run_at)

    @admin.display(description=_("next run"))
    def next_run_at(self, task):
        now = timezone.now()
        try:
            upcoming = task.parsed_schedule.next_after(
                max(now, task.last_run_at or now)
            )
        except ScheduleError as error:
            return gettext("never (%(error)s)") % {"error": error}
        return moment_html(upcoming, now)

"""The rate limits admin: each rate key's window now, and the jobs waiting on it."""

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html

from ..models import RateWindow
from .base import ReadOnlyAdmin, moment_field, queue_database


@admin.register(RateWindow)
class RateWindowAdmin(ReadOnlyAdmin, admin.ModelAdmin):
    list_display = ("key", "rate", "in_window", "waiting_jobs", "next_slot")
    search_fields = ("key",)
    ordering = ("key",)
    readonly_fields = (
        "key",
        "rate",
        "in_window",
        "waiting_jobs",
        "next_slot",
        "updated",
    )
    next_slot = moment_field("next_slot_at", "next slot at")
    updated = moment_field("updated_at", "updated")

    def get_queryset(self, request):
        now = RateWindow.objects.using(queue_database()).database_now()
        return super().get_queryset(request).with_counts(now)

    @admin.display(description="rate")
    def rate(self, window):
        return f"{window.limit} per {window.period:g} s"

    @admin.display(description="starts in the window now")
    def in_window(self, window):
        if not window.not_started:
            return f"{window.counting} of {window.limit}"
        return (
            f"{window.counting} of {window.limit} ({window.not_started} ready, "
            "not yet claimed)"
        )

    @admin.display(description="waiting jobs")
    def waiting_jobs(self, window):
        if not window.waiting:
            return "0"
        url = reverse("admin:steady_queue_job_changelist")
        return format_html('<a href="{}?state=blocked">{}</a>', url, window.waiting)

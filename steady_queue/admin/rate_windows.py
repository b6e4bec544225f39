"""The rate limits admin: each rate key's window now, and the jobs waiting on it."""

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from ..models import RateWindow
from ..reporting.numbers import figures_text
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
    next_slot = moment_field("next_slot_at", _("next slot at"))
    updated = moment_field("updated_at", _("updated"))

    def get_queryset(self, request):
        now = RateWindow.objects.using(queue_database()).database_now()
        return super().get_queryset(request).with_counts(now)

    @admin.display(description=_("rate"))
    def rate(self, window):
        return gettext("%(limit)s per %(period)s s") % {
            "limit": window.limit,
            "period": figures_text(window.period, 6),
        }

    @admin.display(description=_("starts in the window now"))
    def in_window(self, window):
        counts = {
            "counting": window.counting,
            "limit": window.limit,
            "not_started": window.not_started,
        }
        if not window.not_started:
            return gettext("%(counting)s of %(limit)s") % counts
        return (
            gettext(
                "%(counting)s of %(limit)s (%(not_started)s ready, not yet claimed)"
            )
            % counts
        )

    @admin.display(description=_("waiting jobs"))
    def waiting_jobs(self, window):
        if not window.waiting:
            return "0"
        url = reverse("admin:steady_queue_job_changelist")
        return format_html('<a href="{}?state=blocked">{}</a>', url, window.waiting)

"""The admin index's link to the dashboard: "Dashboard" under Steady Queue."""

from django.contrib import admin
from django.http import HttpResponseRedirect
from django.urls import reverse

from ..models import Dashboard
from .base import can


@admin.register(Dashboard)
class DashboardLinkAdmin(admin.ModelAdmin):
    """Shown on the index to whoever may see jobs; its list is the dashboard."""

    def has_module_permission(self, request):
        return can(request, "view_job")

    def has_view_permission(self, request, obj=None):
        return can(request, "view_job")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def changelist_view(self, request, extra_context=None):
        return HttpResponseRedirect(reverse("admin:steady_queue_job_dashboard"))

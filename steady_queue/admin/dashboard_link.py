"""The dashboard's one address: "Dashboard" under Steady Queue.

The sidebar and the admin index link a registered model's list, so the
dashboard is this proxy's list page; the nav bar links the same URL, and the
job admin's old ``job/dashboard/`` address redirects here.
"""

from django.contrib import admin
from django.core.exceptions import PermissionDenied

from ..models import Dashboard
from . import dashboard
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
        if not self.has_view_permission(request):
            raise PermissionDenied
        return dashboard.render_dashboard(request, self.admin_site)

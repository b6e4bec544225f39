"""The semaphores admin: each concurrency key's free slots and expiry."""

from django.contrib import admin
from django.utils.translation import gettext_lazy as _

from ..models import Semaphore
from .base import ReadOnlyAdmin, moment_field


@admin.register(Semaphore)
class SemaphoreAdmin(ReadOnlyAdmin, admin.ModelAdmin):
    list_display = ("key", "value", "expires", "updated")
    search_fields = ("key",)
    ordering = ("key",)
    readonly_fields = ("key", "value", "expires", "created", "updated")
    expires = moment_field("expires_at", _("expires"))
    created = moment_field("created_at", _("created"))
    updated = moment_field("updated_at", _("updated"))

"""The semaphores admin: each concurrency key's free slots and expiry."""

from django.contrib import admin

from ..models import Semaphore
from .base import ReadOnlyAdmin


@admin.register(Semaphore)
class SemaphoreAdmin(ReadOnlyAdmin, admin.ModelAdmin):
    list_display = ("key", "value", "expires_at", "updated_at")
    search_fields = ("key",)
    ordering = ("key",)
    readonly_fields = ("key", "value", "expires_at", "created_at", "updated_at")

"""Semaphore: the free slots of one concurrency key."""

from django.db import models

from .base import QueueManager


class Semaphore(models.Model):
    """How many more runs a concurrency key admits, until ``expires_at``."""

    key = models.CharField(max_length=255, unique=True)
    value = models.IntegerField(default=1)
    expires_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = QueueManager()

    class Meta:
        db_table = "steady_queue_semaphores"
        indexes = [
            models.Index(fields=["key", "value"], name="sq_semaphore_key_value"),
            models.Index(fields=["expires_at"], name="sq_semaphore_expiry"),
        ]

    def __str__(self):
        return f"{self.key} ({self.value} free)"

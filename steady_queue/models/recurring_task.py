"""RecurringTask: a schedule that enqueues a task on every tick."""

from django.db import models

from .base import QueueManager


class RecurringTask(models.Model):
    """A keyed schedule (cron or phrase) for one task and its arguments."""

    key = models.CharField(max_length=255, unique=True)
    schedule = models.CharField(max_length=255)
    task_path = models.CharField(max_length=255)
    arguments = models.JSONField(default=dict, blank=True)
    queue_name = models.CharField(max_length=100, null=True, blank=True)
    priority = models.SmallIntegerField(null=True, blank=True)
    timezone = models.CharField(max_length=64, null=True, blank=True)
    static = models.BooleanField(default=True)
    description = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = QueueManager()

    class Meta:
        db_table = "steady_queue_recurring_tasks"
        indexes = [models.Index(fields=["static"], name="sq_recurring_static")]

    def __str__(self):
        return f"{self.key} ({self.schedule})"

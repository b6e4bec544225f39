"""RecurringExecution: one row per (task, tick), so each tick enqueues once."""

from django.db import models

from .base import QueueManager


class RecurringExecution(models.Model):
    """The job a recurring task enqueued for one run time."""

    # No foreign key: the row must outlive the job, or a cleared job would let a
    # second scheduler enqueue the same tick again.
    job_id = models.BigIntegerField(null=True, blank=True, unique=True)
    task_key = models.CharField(max_length=255)
    run_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)

    objects = QueueManager()

    class Meta:
        db_table = "steady_queue_recurring_executions"
        constraints = [
            models.UniqueConstraint(
                fields=["task_key", "run_at"], name="sq_recurring_once_per_tick"
            ),
        ]

    def __str__(self):
        return f"{self.task_key} at {self.run_at}"

"""RecurringExecution: one row per (task, tick), so each tick enqueues once."""

from django.db import models
from django.db.models import Max

from .base import QueueQuerySet


class RecurringExecutionQuerySet(QueueQuerySet):
    def record(self, task_key, run_at):
        """Claim a tick; raises IntegrityError if a scheduler already did."""
        return self.create(task_key=task_key, run_at=run_at)

    def attach_job(self, execution, job_id):
        """Note the job a claimed tick enqueued."""
        self.filter(pk=execution.pk).update(job_id=job_id)
        execution.job_id = job_id

    def last_run_times(self, keys=None):
        """Return {task key: its latest recorded run time}."""
        rows = self if keys is None else self.filter(task_key__in=list(keys))
        return dict(
            rows.values("task_key")
            .annotate(last=Max("run_at"))
            .values_list("task_key", "last")
            .order_by()
        )

    def clear_before(self, cutoff, batch_size=500):
        """Delete ticks older than ``cutoff``, keeping each task's latest; count them.

        The latest tick stays: it tells a starting scheduler which ticks were
        missed, and keeps any tick at or before it from being enqueued again.
        """
        deleted = 0
        for key, last in self.last_run_times().items():
            older = self.filter(task_key=key, run_at__lt=min(cutoff, last))
            while ids := list(older.values_list("pk", flat=True)[:batch_size]):
                deleted += self.filter(pk__in=ids).delete_rows()
        return deleted


class RecurringExecution(models.Model):
    """The job a recurring task enqueued for one run time."""

    # No foreign key: the row must outlive the job, or a cleared job would let a
    # second scheduler enqueue the same tick again.
    job_id = models.BigIntegerField(null=True, blank=True, unique=True)
    task_key = models.CharField(max_length=255)
    run_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)

    objects = RecurringExecutionQuerySet.as_manager()

    class Meta:
        db_table = "steady_queue_recurring_executions"
        constraints = [
            models.UniqueConstraint(
                fields=["task_key", "run_at"], name="sq_recurring_once_per_tick"
            ),
        ]

    def __str__(self):
        return f"{self.task_key} at {self.run_at}"

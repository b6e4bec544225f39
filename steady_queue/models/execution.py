"""The abstract execution row: one per job, in the table named by the job's state."""

from django.db import models
from django.db.models import Count, Min

from .base import QueueQuerySet


class ExecutionQuerySet(QueueQuerySet):
    @property
    def queue_field(self):
        has_queue = any(f.name == "queue_name" for f in self.model._meta.fields)
        return "queue_name" if has_queue else "job__queue_name"

    def counts_by_queue(self):
        """Return {queue name: number of rows}."""
        rows = self.values_list(self.queue_field).annotate(count=Count("pk"))
        return dict(rows.order_by())

    def oldest_by_queue(self):
        """Return {queue name: created_at of the oldest row}."""
        rows = self.values_list(self.queue_field).annotate(oldest=Min("created_at"))
        return dict(rows.order_by())


class Execution(models.Model):
    """A job's place in one state table; the job id is the primary key."""

    job = models.OneToOneField(
        "steady_queue.Job",
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="+",
    )
    created_at = models.DateTimeField()

    objects = ExecutionQuerySet.as_manager()

    class Meta:
        abstract = True

    def __str__(self):
        return f"{type(self).__name__}(job={self.job_id})"

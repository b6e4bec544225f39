"""ScheduledExecution: jobs waiting for their run_after time."""

from django.db import models, transaction
from django.utils import timezone

from .execution import Execution, ExecutionQuerySet


class ScheduledExecutionQuerySet(ExecutionQuerySet):
    def create_for(self, job):
        """Hold a saved job until its scheduled time."""
        return self.create(
            job=job,
            queue_name=job.queue_name,
            priority=job.priority,
            scheduled_at=job.scheduled_at,
            created_at=job.enqueued_at,
        )

    def create_all_for(self, jobs, now=None):
        """Hold saved jobs until their scheduled times, in one insert."""
        now = now or timezone.now()
        return self.bulk_create(
            [
                self.model(
                    job_id=job.pk,
                    queue_name=job.queue_name,
                    priority=job.priority,
                    scheduled_at=job.scheduled_at,
                    created_at=now,
                )
                for job in jobs
            ]
        )

    def due(self, now=None):
        """Scheduled jobs whose time has come, earliest first."""
        return self.filter(scheduled_at__lte=now or timezone.now()).order_by(
            "scheduled_at", "-priority", "job_id"
        )

    def dispatch_next_batch(self, batch_size):
        """Move up to ``batch_size`` due jobs to ready; return how many moved."""
        from .ready_execution import ReadyExecution

        now = timezone.now()
        with transaction.atomic(using=self.db):
            rows = self.due(now).pop_batch(
                batch_size, ["job", "queue_name", "priority"]
            )
            ReadyExecution.objects.using(self.db).bulk_create(
                [
                    ReadyExecution(
                        job_id=job_id,
                        queue_name=queue_name,
                        priority=priority,
                        created_at=now,
                    )
                    for job_id, queue_name, priority in rows
                ]
            )
            self.notify_ready({queue_name for _, queue_name, _ in rows})
        return len(rows)


class ScheduledExecution(Execution):
    """A job that may not run before ``scheduled_at``."""

    queue_name = models.CharField(max_length=100)
    priority = models.SmallIntegerField(default=0)
    scheduled_at = models.DateTimeField()

    objects = ScheduledExecutionQuerySet.as_manager()

    class Meta:
        db_table = "steady_queue_scheduled_executions"
        indexes = [
            models.Index(
                fields=["scheduled_at", "-priority", "job"], name="sq_scheduled_due"
            ),
        ]

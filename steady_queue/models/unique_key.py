"""UniqueKey: which job last took a unique key, to find a pending duplicate."""

from django.db import models
from django.db.models import Exists, OuterRef

from .base import QueueQuerySet


class UniqueKeyQuerySet(QueueQuerySet):
    def take(self, key, job_id):
        """Give ``key`` to a saved job unless a pending job holds it.

        Returns the pending holder's id (nothing changed), or None once the key
        is this job's. Runs in the caller's transaction; the key's row stays
        locked until it ends, so two enqueues of one key take turns.
        """
        found = self.lock_or_create({"key": key}, {"job_id": job_id}, ["pk", "job_id"])
        if found is None:
            return None
        pk, holder = found
        if self.pending_job(holder):
            return holder
        self.filter(pk=pk).update(job_id=job_id)
        return None

    def pending_job(self, job_id):
        """Whether a job is waiting to start: ready, scheduled or blocked."""
        from .blocked_execution import BlockedExecution
        from .ready_execution import ReadyExecution
        from .scheduled_execution import ScheduledExecution

        return any(
            model.objects.using(self.db).filter(job_id=job_id).exists()
            for model in (ReadyExecution, ScheduledExecution, BlockedExecution)
        )

    def stale(self):
        """Keys whose job is no longer pending (it started, or was deleted)."""
        from .blocked_execution import BlockedExecution
        from .ready_execution import ReadyExecution
        from .scheduled_execution import ScheduledExecution

        queryset = self
        for model in (ReadyExecution, ScheduledExecution, BlockedExecution):
            queryset = queryset.exclude(
                Exists(model.objects.filter(job_id=OuterRef("job_id")))
            )
        return queryset


class UniqueKey(models.Model):
    """The last job enqueued with a @unique key.

    One row per key ever used; dispatcher maintenance deletes the rows of keys
    whose job has started. The job id is not a foreign key: finished jobs are
    deleted in bulk without touching this table.
    """

    key = models.CharField(max_length=255, unique=True)
    job_id = models.BigIntegerField()

    objects = UniqueKeyQuerySet.as_manager()

    class Meta:
        db_table = "steady_queue_unique_keys"

    def __str__(self):
        return f"{self.key} (job {self.job_id})"

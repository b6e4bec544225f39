"""UniqueKey: which job last took a unique key, to find a pending duplicate."""

from django.db import models
from django.db.models import Exists, OuterRef

from ..dialects.isolation import atomic, in_a_snapshot
from .base import QueueQuerySet
from .blocked_execution import BlockedExecution
from .ready_execution import ReadyExecution
from .scheduled_execution import ScheduledExecution


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
        """Whether a job is waiting to start: ready, scheduled or blocked.

        Inside a caller's transaction at REPEATABLE READ or SERIALIZABLE the
        rows are read with a lock: one claimed or moved since the snapshot
        then fails the read (PostgreSQL's serialization failure; MySQL's
        locking read sees it gone) rather than pass for pending.
        """
        locking = in_a_snapshot(self.connection)
        for model in (ReadyExecution, ScheduledExecution, BlockedExecution):
            rows = model.objects.using(self.db).filter(job_id=job_id)
            if locking:
                rows = rows.select_for_update()
            if rows.values_list("pk").first() is not None:
                return True
        return False

    def stale(self):
        """Keys whose job is no longer pending (it started, or was deleted)."""
        queryset = self
        for model in (ReadyExecution, ScheduledExecution, BlockedExecution):
            queryset = queryset.exclude(
                Exists(model.objects.filter(job_id=OuterRef("job_id")))
            )
        return queryset

    def forget_stale(self, batch_size=500):
        """Delete the keys whose job is no longer pending; return how many.

        A batch at a time, in key id order, each read first and then deleted
        only if unchanged (see delete_unchanged).
        """
        forgotten = 0
        last = 0
        while True:
            rows = list(
                self.stale()
                .filter(pk__gt=last)
                .order_by("pk")
                .values_list("pk", "job_id")[:batch_size]
            )
            if not rows:
                return forgotten
            last = rows[-1][0]
            forgotten += self.delete_unchanged(rows)

    def delete_unchanged(self, rows):
        """Delete these (key id, job id) rows, unless the key now names another job.

        An enqueue may take a stale key over between the read that found it
        stale and this delete. Deleting by staleness again is not safe: on
        PostgreSQL a DELETE waiting for the enqueue's row lock re-checks the
        new row, but the pending check's subquery still sees the snapshot from
        before the enqueue, so it would delete the new job's key and let its
        next duplicate through. Instead a row is deleted only if it still
        names the job read. SKIP LOCKED: a key an enqueue is deciding on right
        now is left for the next maintenance, and this never waits on (nor
        deadlocks with) an enqueue. Returns how many were deleted.
        """
        if not rows:
            return 0
        with atomic(using=self.db):
            locked = list(
                self.filter(
                    pk__in=[pk for pk, _ in rows],
                    # A key names one job, and a job takes one key: this is
                    # "each row still names the job read with it".
                    job_id__in=[job_id for _, job_id in rows],
                )
                .order_by("key")
                .skip_locked()
                .values_list("pk", flat=True)
            )
            return self.filter(pk__in=locked).delete_rows() if locked else 0


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

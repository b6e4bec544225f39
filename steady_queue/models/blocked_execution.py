"""BlockedExecution: jobs waiting for a concurrency slot."""

from django.db import models, transaction
from django.utils import timezone

from .execution import Execution, ExecutionQuerySet


class BlockedExecutionQuerySet(ExecutionQuerySet):
    def create_all_for(self, jobs_and_expiries, now):
        """Block saved jobs, each until its slot holder's duration ``expires_at``."""
        return self.bulk_create(
            [
                self.model(
                    job_id=job.pk,
                    queue_name=job.queue_name,
                    priority=job.priority,
                    concurrency_key=job.concurrency_key,
                    expires_at=expires_at,
                    created_at=now,
                )
                for job, expires_at in jobs_and_expiries
            ]
        )

    def for_key(self, concurrency_key):
        """Jobs waiting on a key, in the order they get released."""
        return self.filter(concurrency_key=concurrency_key).order_by(
            "-priority", "job_id"
        )

    def release_next(self, keys, now=None):
        """Make ready the next blocked jobs of these keys that can take a slot.

        Runs in the caller's transaction, after it gave the slots back; returns
        the jobs made ready, highest priority first per key.
        """
        from .job import Job
        from .ready_execution import ReadyExecution

        now = now or timezone.now()
        released = []
        for key in sorted(set(keys)):
            while True:
                # SKIP LOCKED: another process releasing the same key takes the
                # next job instead of waiting for this one.
                job_id = (
                    self.for_key(key)
                    .skip_locked()
                    .values_list("job", flat=True)
                    .first()
                )
                if job_id is None:
                    break
                job = Job.objects.using(self.db).get(pk=job_id)
                if not job.take_concurrency_slot(now):
                    break  # no free slot: the job stays blocked, and so do the rest
                self.filter(job_id=job_id).delete_rows()
                ReadyExecution.objects.using(self.db).create_all_for([job], now)
                released.append(job)
        return released

    def expired(self, now=None):
        """Blocked jobs whose slot holders' duration has passed."""
        return self.filter(expires_at__lt=now or timezone.now())

    def release_expired(self, batch_size=100, now=None):
        """Release blocked jobs whose keys' semaphores expired or have free slots.

        A slot whose holder died without giving it back is freed when its
        semaphore expires; this is what then runs the jobs that waited on it.
        Each key is released in its own transaction. Returns the jobs released.
        """
        from .semaphore import Semaphore

        now = now or timezone.now()
        keys = list(
            self.expired(now)
            .order_by()
            .values_list("concurrency_key", flat=True)
            .distinct()[:batch_size]
        )
        held = Semaphore.objects.using(self.db).filter(key__in=keys, value__lte=0)
        releasable = set(keys) - set(held.values_list("key", flat=True))
        released = []
        for key in sorted(releasable):
            with transaction.atomic(using=self.db):
                released.extend(self.release_next([key], now))
        return released


class BlockedExecution(Execution):
    """A job held back until its concurrency key has a free slot."""

    queue_name = models.CharField(max_length=100)
    priority = models.SmallIntegerField(default=0)
    concurrency_key = models.CharField(max_length=255)
    expires_at = models.DateTimeField()

    objects = BlockedExecutionQuerySet.as_manager()

    class Meta:
        db_table = "steady_queue_blocked_executions"
        indexes = [
            models.Index(
                fields=["concurrency_key", "-priority", "job"],
                name="sq_blocked_release",
            ),
            models.Index(
                fields=["expires_at", "concurrency_key"], name="sq_blocked_expiry"
            ),
        ]

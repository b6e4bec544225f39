"""BlockedExecution: jobs waiting for a concurrency slot."""

from django.db import models, transaction
from django.db.models import Exists, Min, OuterRef
from django.utils import timezone

from .. import models as models_package
from ..decorators.concurrency import limits_by_job
from .execution import Execution, ExecutionQuerySet
from .ready_execution import ReadyExecution

# The models that import this module, read through their package when called.
from .semaphore import Semaphore, slot_duration


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
        now = now or timezone.now()
        semaphores = Semaphore.objects.using(self.db)
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
                job = models_package.Job.objects.using(self.db).get(pk=job_id)
                limit = limits_by_job([job])[job.pk]
                if not semaphores.take_slot_for(job, limit, now):
                    break  # no free slot: the job stays blocked, and so do the rest
                self.filter(job_id=job_id).delete_rows()
                ReadyExecution.objects.using(self.db).create_all_for([job], now)
                released.append(job)
        return released

    def expired(self, now=None):
        """Blocked jobs whose slot holders' duration has passed."""
        return self.filter(expires_at__lt=now or timezone.now())

    def releasable_keys(self, now=None):
        """Keys of expired blocked jobs whose semaphore is gone or has a free slot.

        Oldest expiry first. Keys whose slots are all held are left out here,
        in the query: however many busy keys there are, they cannot crowd a
        key whose holder leaked out of a batch.
        """
        held = Semaphore.objects.filter(key=OuterRef("concurrency_key"), value__lte=0)
        return (
            self.expired(now)
            .exclude(Exists(held))
            .values("concurrency_key")
            .annotate(oldest=Min("expires_at"))
            .order_by("oldest", "concurrency_key")
            .values_list("concurrency_key", flat=True)
        )

    def release_expired(self, batch_size=100, max_keys=500, now=None):
        """Release blocked jobs whose keys' semaphores expired or have free slots.

        A slot whose holder died without giving it back is freed when its
        semaphore expires; this is what then runs the jobs that waited on it.
        Keys are taken oldest expiry first, ``batch_size`` at a time, until none
        is left or ``max_keys`` were looked at (one dispatcher poll stays short;
        the next call starts again from the oldest, so no key starves). Each
        key is released in its own transaction. Returns the jobs released.
        """
        now = now or timezone.now()
        released = []
        seen = set()
        while len(seen) < max_keys:
            # A key seen once is not looked at again in this call: one whose
            # blocked jobs another process holds locked would come back forever.
            batch = min(batch_size, max_keys - len(seen))
            keys = list(
                self.releasable_keys(now).exclude(concurrency_key__in=seen)[:batch]
            )
            if not keys:
                break
            seen.update(keys)
            for key in keys:
                with transaction.atomic(using=self.db):
                    released.extend(self.release_next([key], now))
        return released

    def make_ready_now(self):
        """Run these blocked jobs now, past their concurrency limits; return ids.

        An operator forcing the runs: each takes a slot of its key even when
        none is free, so the semaphore may go over its limit while it runs.
        Its finish then gives back exactly the slot it took, and the runs after
        it still keep to the limit.
        """
        now = timezone.now()
        semaphores = Semaphore.objects.using(self.db)
        with transaction.atomic(using=self.db):
            ids = [row[0] for row in self.delete_returning(["job"])]
            jobs = list(models_package.Job.objects.using(self.db).filter(pk__in=ids))
            limits = limits_by_job(jobs)
            # Sorted by key: semaphores are locked in the order every other
            # transaction locks them, so this cannot deadlock with theirs.
            for job in sorted(jobs, key=lambda job: job.concurrency_key or ""):
                limit = limits[job.pk]
                if limit is not None:
                    semaphores.acquire_past_limit(
                        job.concurrency_key,
                        limit.to,
                        slot_duration(limit, job.backend_name),
                        now,
                    )
            ReadyExecution.objects.using(self.db).create_all_for(jobs, now)
        return ids


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

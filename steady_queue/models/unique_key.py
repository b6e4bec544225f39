"""UniqueKey: which job last took a unique key, to find a pending duplicate."""

from django.db import models
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from ..decorators.unique import unique_of
from ..dialects.isolation import atomic, in_a_snapshot
from ..exceptions import ConcurrencyKeyError
from ..pipeline.loader import tasks_by_path
from ..tracing import TRACE_KEY
from .base import QueueQuerySet
from .blocked_execution import BlockedExecution
from .cancelled_run import CancelledRun
from .claimed_execution import ClaimedExecution
from .ready_execution import ReadyExecution
from .scheduled_execution import ScheduledExecution


class UniqueKeyQuerySet(QueueQuerySet):
    def take(self, key, job_id, until_finished=False, expires_at=None):
        """Give ``key`` to a saved job unless a job holds it: a pending one,
        or (a key taken ``until_finished``) one running, and the key's
        ``expires_at`` (@unique's ttl) not passed.

        Returns the holder's id (nothing changed), or None once the key is
        this job's, until ``expires_at`` (None: no end). Runs in the
        caller's transaction; the key's row stays locked until it ends, so
        two enqueues of one key take turns. A run killed with its worker
        holds the key until its claim is resolved: failed (the key is free)
        or retried (still held), in one transaction.
        """
        taken = {
            "job_id": job_id,
            "until_finished": until_finished,
            "expires_at": expires_at,
        }
        found = self.lock_or_create(
            {"key": key}, taken, ["pk", "job_id", "until_finished", "expires_at"]
        )
        if found is None:
            return None
        pk, holder, holder_until_finished, holder_expires_at = found
        expired = holder_expires_at is not None and holder_expires_at <= timezone.now()
        if not expired and (
            self.pending_job(holder)
            or (holder_until_finished and self.running_job(holder))
        ):
            return holder
        self.filter(pk=pk).update(**taken)
        return None

    def take_for_retries(self, jobs):
        """Give failed jobs about to be retried their @unique keys again, as
        an enqueue would (take); return the ids of those whose key another
        run holds, which must stay failed.

        The key is computed from the job's stored call, as at its enqueue
        (its trace context left out). A job whose task is gone, has no
        @unique, or whose key callable now fails is retried without a key.
        Runs in the caller's transaction, after its batch rows are locked
        (an enqueue's lock order); each key's row stays locked until it ends.
        """
        tasks = tasks_by_path({job.task_path for job in jobs})
        now = timezone.now()
        held = set()
        for job in jobs:
            task = tasks.get(job.task_path)
            unique = unique_of(task) if task is not None else None
            if unique is None:
                continue
            call = dict(job.arguments)
            call.pop(TRACE_KEY, None)
            try:
                key = unique.key_for(task, job.args, job.kwargs, call)
            except ConcurrencyKeyError:
                continue
            holder = self.take(
                key,
                job.pk,
                until_finished=unique.until_finished,
                expires_at=unique.expires_at(now),
            )
            if holder is not None and holder != job.pk:
                held.add(job.pk)
        return held

    def take_or_postpone(self, key, job_id, quiet, max_wait=None):
        """Give a @debounce ``key`` to a saved job, unless a job holding it
        is still scheduled: then put that job's run off to ``quiet`` seconds
        from now (no later than ``max_wait`` seconds after its enqueue) and
        return its id.

        Runs in the caller's transaction with the key's row locked, as take()
        does. A holder a dispatcher is moving to ready right now is not
        waited for: the key passes to the new job, which runs after it.
        """
        found = self.lock_or_create({"key": key}, {"job_id": job_id}, ["pk", "job_id"])
        if found is None:
            return None
        pk, holder = found
        scheduled = ScheduledExecution.objects.using(self.db)
        if scheduled.postpone(holder, quiet, max_wait):
            return holder
        self.filter(pk=pk).update(job_id=job_id, until_finished=False, expires_at=None)
        return None

    def running_job(self, job_id):
        """Whether a job is claimed by a worker (running, or about to), or
        was cancelled while its run goes on (CancelledRun: a thread cannot
        be interrupted, and the run ends when its worker sees the cancel).

        Locked as pending_job's reads are, in a caller's snapshot."""
        for model in (ClaimedExecution, CancelledRun):
            rows = model.objects.using(self.db).filter(job_id=job_id)
            if in_a_snapshot(self.connection):
                rows = rows.select_for_update()
            if rows.values_list("pk").first() is not None:
                return True
        return False

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
        """Keys whose job no longer holds them: no longer pending (it
        started, or was deleted), and for a key held until finished, not
        running either; or past their ``expires_at`` (@unique's ttl)."""
        released = Q()
        for model in (ReadyExecution, ScheduledExecution, BlockedExecution):
            released &= ~Exists(model.objects.filter(job_id=OuterRef("job_id")))
        running = Exists(
            ClaimedExecution.objects.filter(job_id=OuterRef("job_id"))
        ) | Exists(CancelledRun.objects.filter(job_id=OuterRef("job_id")))
        released &= ~(Q(until_finished=True) & running)
        return self.filter(released | Q(expires_at__lte=timezone.now()))

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
            locked = (
                self.filter(
                    pk__in=[pk for pk, _ in rows],
                    # A key names one job, and a job takes one key: this is
                    # "each row still names the job read with it".
                    job_id__in=[job_id for _, job_id in rows],
                )
                .order_by("key")
                .lock_batch()
            )
            return self.filter(pk__in=locked).delete_rows() if locked else 0


class UniqueKey(models.Model):
    """The last job enqueued with a @unique key.

    One row per key ever used; dispatcher maintenance deletes the rows of keys
    whose job has started (or, taken until finished, ended). The job id is not
    a foreign key: finished jobs are deleted in bulk without touching this
    table.
    """

    key = models.CharField(max_length=255, unique=True)
    job_id = models.BigIntegerField()
    # @unique(until="finished"): the job holds the key while it runs too. A
    # database default: a release from before it inserts keys without it.
    until_finished = models.BooleanField(default=False, db_default=False)
    # @unique(ttl=...): when the key stops holding, however its job is doing.
    # NULL: never (a release from before it never writes it).
    expires_at = models.DateTimeField(null=True, blank=True)

    objects = UniqueKeyQuerySet.as_manager()

    class Meta:
        db_table = "steady_queue_unique_keys"

    def __str__(self):
        return f"{self.key} (job {self.job_id})"

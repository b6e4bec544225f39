"""BlockedExecution: jobs waiting for a concurrency slot or a rate window."""

import time
from functools import partial

from django.db import models, transaction
from django.db.models import Exists, Min, OuterRef
from django.utils import timezone

# The models that import this module, read through their package when called.
from .. import models as models_package
from ..decorators.limits import limits_by_job
from ..dialects.isolation import atomic
from .admission import (
    BLOCKED,
    CONCURRENCY,
    DEFERRED,
    DEPENDENCIES,
    DISCARDED,
    RATE,
    Admission,
)
from .execution import Execution, ExecutionQuerySet
from .rate_window import RateWindow
from .ready_execution import ReadyExecution
from .semaphore import Semaphore

# The least a dispatcher waits before looking at rate windows again: one
# that is due now (room for a job that could not be let go at once), or one
# another process holds.
MIN_WAIT = 0.01
BUSY_WINDOW_WAIT = 0.1


class BlockedExecutionQuerySet(ExecutionQuerySet):
    def create_all_for(self, jobs_and_decisions, now):
        """Block saved jobs, each as its admission Decision says: waiting for
        a slot of a concurrency key (until its holder's duration passes), or
        for room in a rate window (about until it opens)."""
        return self.bulk_create(
            [
                self.model(
                    job_id=job.pk,
                    queue_name=job.queue_name,
                    priority=job.priority,
                    concurrency_key=decision.key,
                    waits_for=decision.waits_for,
                    expires_at=decision.until,
                    created_at=now,
                )
                for job, decision in jobs_and_decisions
            ]
        )

    def wait_for_dependencies(self, job, pending, now):
        """Block a saved job until ``pending`` jobs it depends on have ended
        (JobDependency.objects.settle counts them down and lets it go)."""
        return self.create(
            job_id=job.pk,
            queue_name=job.queue_name,
            priority=job.priority,
            concurrency_key="",
            waits_for=DEPENDENCIES,
            dependencies_pending=pending,
            expires_at=now,
            created_at=now,
        )

    def waiting_on_dependencies(self):
        """Jobs waiting for the jobs they depend on to end."""
        return self.filter(waits_for=DEPENDENCIES)

    def for_key(self, key, waits_for=CONCURRENCY):
        """Jobs waiting on a key, in the order they get released."""
        return self.filter(concurrency_key=key, waits_for=waits_for).order_by(
            "-priority", "job_id"
        )

    def release_next(self, keys, now=None, holding=True):
        """Make ready the next blocked jobs of these concurrency keys that now
        pass their limits; return them, per key in the order released.

        Runs in the caller's transaction, after it gave the slots back (it
        ``holding`` their semaphores). A job released from a key may still
        wait, for a slot of another key or for room in a rate window: it then
        waits on that instead, and the next job of the key is looked at.
        """
        admission = Admission(self.db, now, out_of_order=True)
        if holding:
            admission.holds(keys)
        released = []
        for key in sorted(set(keys)):
            released += self._release_key(admission, CONCURRENCY, key)
        admission.write()
        if released:
            ReadyExecution.objects.using(self.db).create_all_for(
                released, admission.now
            )
        return released

    def release_rate(self, key, now=None):
        """Make ready the jobs waiting on a rate key's window, as many as it
        has room for now, highest priority first, then oldest; return them.

        In a transaction of its own; a window another process is letting jobs
        go from (or enqueuing under) right now is skipped, not waited for:
        then None.
        """
        with atomic(using=self.db):
            admission = Admission(self.db, now, out_of_order=True)
            if not admission.adopt_window(key):
                return None
            released = self._release_key(admission, RATE, key)
            admission.write()
            if released:
                ReadyExecution.objects.using(self.db).create_all_for(
                    released, admission.now
                )
        return released

    def release_due_rates(self, max_keys=100):
        """Let go the jobs waiting on rate windows whose next slot has come.

        Returns (jobs released, seconds until the next window with jobs
        waiting opens, or None if none waits). Judged by the database's
        clock, whichever host runs it.
        """
        windows = RateWindow.objects.using(self.db)
        waiting = list(windows.waiting().values_list("key", "next_slot_at")[:max_keys])
        if not waiting:
            return [], None  # one query a poll where no job waits on a rate
        started = time.monotonic()
        now = windows.database_now()
        released, busy = [], False
        for key, next_slot_at in waiting:
            if next_slot_at > now:
                break
            found = self.release_rate(key)
            busy = busy or found is None
            released += found or []
        upcoming = windows.waiting().values_list("next_slot_at", flat=True).first()
        if upcoming is None:
            return released, None
        elapsed = time.monotonic() - started
        wait = (upcoming - now).total_seconds() - elapsed
        # A window another process holds (a long transaction enqueuing under
        # its key) is due until it is let go: look again soon, not at once.
        return released, max(wait, BUSY_WINDOW_WAIT if busy else MIN_WAIT)

    def _release_key(self, admission, waits_for, key):
        """Release the jobs waiting on one key until one must wait on; the
        jobs made ready (their ready rows are the caller's to write)."""
        released, discarded = [], []
        jobs = models_package.Job.objects.using(self.db)
        while True:
            # SKIP LOCKED: another process releasing the same key takes the
            # next job instead of waiting for this one.
            job_id = (
                self.for_key(key, waits_for)
                .skip_locked()
                .values_list("job", flat=True)
                .first()
            )
            if job_id is None:
                admission.stop_waiting(key)
                break
            job = jobs.get(pk=job_id)
            limits = limits_by_job([job])[job.pk]
            decision = None
            if limits is not None:
                decision = admission.place(
                    job,
                    limits,
                    releasing=(waits_for, key),
                    holds_concurrency=waits_for == RATE,
                )
            if decision is None or decision.outcome not in (BLOCKED, DEFERRED):
                self.filter(job_id=job_id).delete_rows()
                if decision is not None and decision.outcome == DISCARDED:
                    discarded.append((job, decision.error))
                else:
                    released.append(job)
                continue
            if decision.outcome == DEFERRED:
                self._look_again_later(waits_for, key, admission.now)
                break
            if (decision.waits_for, decision.key) == (waits_for, key):
                break  # no room: the job stays blocked, and so do the rest
            # Free here, full there: it waits there now, and the next job of
            # this key is looked at.
            self.filter(job_id=job_id).update(
                waits_for=decision.waits_for,
                concurrency_key=decision.key,
                expires_at=decision.until,
            )
        if discarded:
            jobs.discard_unrun(discarded, admission.now)
        return released

    def _look_again_later(self, waits_for, key, now):
        """The head job of a key needs a lock another transaction holds, out
        of the order this one could wait for it in: look at the key again
        once this transaction has committed, holding nothing (a rate window
        says so with its next slot, which the dispatcher reads)."""
        if waits_for == RATE:
            return
        # Should that fail, the dispatcher's maintenance finds the key: its
        # head job looks expired, and the key has a free slot.
        self.for_key(key).filter(expires_at__gt=now).update(expires_at=now)
        transaction.on_commit(
            partial(self._release_in_own_transaction, key), using=self.db, robust=True
        )

    def _release_in_own_transaction(self, key):
        with atomic(using=self.db):
            self.release_next([key], holding=False)

    def expired(self, now=None):
        """Jobs waiting for a concurrency slot whose holders' duration has passed."""
        return self.filter(waits_for=CONCURRENCY, expires_at__lt=now or timezone.now())

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
                with atomic(using=self.db):
                    released.extend(self.release_next([key], now, holding=False))
        return released

    def make_ready_now(self):
        """Run these blocked jobs now, past their limits; return their ids.

        An operator forcing the runs: each takes a slot of each of its keys
        even when none is free, so a semaphore may go over its limit while it
        runs, and a start in each rate window even when it is full. Its finish
        then gives back exactly the slots it took, and the runs after it
        still keep to the limits.
        """
        now = timezone.now()
        with atomic(using=self.db):
            rows = self.delete_returning(["job", "waits_for"])
            waiting_for = dict(rows)
            jobs = list(
                models_package.Job.objects.using(self.db).filter(pk__in=waiting_for)
            )
            limits = limits_by_job(jobs)
            admission = Admission(self.db, now)
            admission.lock_all(jobs, limits)
            for job in jobs:
                if limits[job.pk] is not None:
                    admission.force(job, limits[job.pk], waiting_for[job.pk] == RATE)
            admission.write()
            ReadyExecution.objects.using(self.db).create_all_for(jobs, now)
        return list(waiting_for)

    def discard_all(self):
        """Delete these blocked jobs entirely; return their ids.

        A job waiting for a rate window holds its concurrency slots: they are
        given back (and the next blocked jobs of their keys released) in the
        same transaction.
        """
        with atomic(using=self.db):
            # A write first (ExecutionQuerySet.discard_all says why): which
            # jobs held slots is read from the rows it deleted.
            rows = self.delete_returning(["job", "waits_for"])
            ids = [job_id for job_id, _ in rows]
            holding = list(
                models_package.Job.objects.using(self.db)
                .filter(pk__in=[job_id for job_id, kind in rows if kind == RATE])
                .only("pk", "concurrency_key", "limit_keys")
            )
            self.discard_jobs(ids)
            claims = models_package.ClaimedExecution.objects.using(self.db)
            claims.release_concurrency_slots(holding)
        return ids


class BlockedExecution(Execution):
    """A job held back until its key has a free slot (``waits_for``
    "concurrency") or its rate window has room ("rate"); ``concurrency_key``
    is that key. Or ("dependency") until the ``dependencies_pending`` jobs it
    waits for have ended: no release of a key ever looks at those rows."""

    queue_name = models.CharField(max_length=100)
    priority = models.SmallIntegerField(default=0)
    concurrency_key = models.CharField(max_length=255)
    waits_for = models.CharField(max_length=11, default=CONCURRENCY)
    expires_at = models.DateTimeField()
    dependencies_pending = models.IntegerField(default=0, db_default=0)

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

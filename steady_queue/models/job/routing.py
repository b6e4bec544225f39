"""Routing: giving saved jobs their execution row, through their limits."""

from functools import partial

from django.db import transaction
from django.utils import timezone

from ...decorators.limits import limits_by_job
from ...pipeline.job_lines import log_failed_unrun
from ...states import State
from ..admission import BLOCKED, DISCARDED, READY, Admission
from ..batch import Batch
from ..blocked_execution import BlockedExecution
from ..failed_execution import FailedExecution
from ..job_dependency import FAILED, JobDependency
from ..ready_execution import ReadyExecution
from ..scheduled_execution import ScheduledExecution


class Routing:
    """JobQuerySet verbs that put saved jobs in a state: scheduled, ready,
    blocked, or (a discarded conflict) failed."""

    def route(self, jobs, now=None, limits=None):
        """Give saved jobs their first execution row; return {job id: State}.

        ``limits`` is {job id: TaskLimits or None}, as dispatch_all takes.
        """
        scheduled = [job for job in jobs if job.is_scheduled]
        if scheduled:
            ScheduledExecution.objects.using(self.db).create_all_for(scheduled, now)
        states = self.dispatch_all(
            [job for job in jobs if not job.is_scheduled], now, limits
        )
        return {**{job.pk: State.SCHEDULED for job in scheduled}, **states}

    def dispatch_all(self, jobs, now=None, limits=None, holding_concurrency=False):
        """Make saved jobs ready, unless their limits hold them back.

        A job that finds no free concurrency slot, or no room in a rate
        window, is blocked until there is, or, if its limit says "discard",
        recorded as failed without running (models/admission.py says which).
        ``limits`` maps job ids to their TaskLimits when the caller holds the
        tasks (enqueue); otherwise each task's limits are looked up once.
        ``holding_concurrency``: the jobs hold their concurrency slots already
        (handed back to ready from a claim) and pass their rate limits only.
        Runs in the caller's transaction; returns {job id: State}.
        """
        now = now or timezone.now()
        if limits is None:
            limits = limits_by_job(jobs)
        # A discarded job is counted in its batch: lock those batch rows
        # before any semaphore row, the order every transaction takes them in.
        # (A job holding its slots is never discarded.)
        Batch.objects.using(self.db).lock_all(
            job.batch_id
            for job in jobs
            if job.batch_id
            and not holding_concurrency
            and limits.get(job.pk)
            and limits[job.pk].may_discard
        )
        admission = Admission(self.db, now)
        # Every semaphore and window locked, in key order, before deciding:
        # each stays locked until the caller's transaction ends, so a run
        # finishing meanwhile waits, then sees the jobs blocked here.
        admission.lock_all(jobs, limits)
        ready, blocked, discarded = [], [], []
        for job in jobs:
            if limits.get(job.pk) is None:
                ready.append(job)  # no limit (left), or its task is gone
                continue
            decision = admission.place(
                job, limits[job.pk], holds_concurrency=holding_concurrency
            )
            if decision.outcome == READY:
                ready.append(job)
            elif decision.outcome == BLOCKED:
                blocked.append((job, decision))
            elif decision.outcome == DISCARDED:
                discarded.append((job, decision.error))
        admission.write()
        if ready:
            ReadyExecution.objects.using(self.db).create_all_for(ready, now)
        if blocked:
            BlockedExecution.objects.using(self.db).create_all_for(blocked, now)
        if discarded:
            self.discard_unrun(discarded, now)
        return {
            **{job.pk: State.READY for job in ready},
            **{job.pk: State.BLOCKED for job, _ in blocked},
            **{job.pk: State.FAILED for job, _ in discarded},
        }

    def locked_with_dependents(self):
        """Lock these jobs' rows (selected by key, nothing else) in id order;
        return the ids of those whose row says ``has_dependents``.

        The flag is read after the lock, never tested in the locking read's
        WHERE: PostgreSQL's FOR UPDATE skips, without waiting, a row whose
        committed version does not match, so the flag a dependent's enqueue
        set (holding the row, not yet committed) would be missed and its
        edge never settled. Locked by key, the read waits for that enqueue
        and then sees its flag.
        """
        rows = self.select_for_update().order_by("pk")
        return {pk for pk, flag in rows.values_list("pk", "has_dependents") if flag}

    def discard_unrun(self, jobs_and_errors, now):
        """Record these jobs as failed without running, each with its error;
        the jobs that wait for them end too (JobDependency.settle)."""
        # Whether each has dependents, read again under lock: the instance
        # may have been read before a dependent's enqueue set it.
        pks = [job.pk for job, _ in jobs_and_errors]
        flagged = (
            self.model.objects.using(self.db)
            .filter(pk__in=pks)
            .locked_with_dependents()
        )
        jobs = []
        for job, error in jobs_and_errors:
            job.has_dependents = job.pk in flagged
            job.finished_at = now
            job.add_error(error)
            jobs.append(job)
        self.model.objects.using(self.db).bulk_update(
            jobs, ["finished_at", "errors", "errors_dropped"]
        )
        FailedExecution.objects.using(self.db).create_all_for(jobs, now)
        Batch.objects.using(self.db).count_ended(failed=jobs)
        JobDependency.objects.using(self.db).settle([(job, FAILED) for job in jobs])
        # Said once it is so: the caller's transaction may yet roll back.
        for job, error in jobs_and_errors:
            transaction.on_commit(partial(log_failed_unrun, job, error), using=self.db)

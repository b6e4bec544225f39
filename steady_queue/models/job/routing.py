"""Routing: giving saved jobs their execution row, through concurrency limits."""

from django.utils import timezone

from ...decorators.concurrency import limits_by_job
from ...exceptions import ConcurrencyLimitDiscarded, error_payload
from ...states import State
from ..batch import Batch
from ..blocked_execution import BlockedExecution
from ..failed_execution import FailedExecution
from ..ready_execution import ReadyExecution
from ..scheduled_execution import ScheduledExecution
from ..semaphore import Semaphore, slot_duration


class Routing:
    """JobQuerySet verbs that put saved jobs in a state: scheduled, ready,
    blocked, or (a discarded conflict) failed."""

    def route(self, jobs, now=None, limits=None):
        """Give saved jobs their first execution row; return {job id: State}.

        ``limits`` is {job id: ConcurrencyLimit or None}, as dispatch_all takes.
        """
        scheduled = [job for job in jobs if job.is_scheduled]
        if scheduled:
            ScheduledExecution.objects.using(self.db).create_all_for(scheduled, now)
        states = self.dispatch_all(
            [job for job in jobs if not job.is_scheduled], now, limits
        )
        return {**{job.pk: State.SCHEDULED for job in scheduled}, **states}

    def dispatch_all(self, jobs, now=None, limits=None):
        """Make saved jobs ready, unless their concurrency key has no free slot.

        A job that finds no slot is blocked until one is released, or, if its
        limit says on_conflict="discard", recorded as failed without running.
        ``limits`` maps job ids to their ConcurrencyLimit when the caller holds
        the tasks (enqueue); otherwise each task's limit is looked up once.
        Runs in the caller's transaction; returns {job id: State}.
        """
        now = now or timezone.now()
        if limits is None:
            limits = limits_by_job(jobs)
        # A discarded job is counted in its batch: lock those batch rows
        # before any semaphore row, the order every transaction takes them in.
        Batch.objects.using(self.db).lock_all(
            job.batch_id
            for job in jobs
            if job.batch_id and _may_discard(limits.get(job.pk))
        )
        semaphores = Semaphore.objects.using(self.db)
        ready, blocked, discarded = [], [], []
        # Sorted by key: transactions taking several semaphores take them in
        # the same order, so they cannot deadlock on each other.
        for job in sorted(jobs, key=lambda job: job.concurrency_key or ""):
            limit = limits.get(job.pk)
            # The semaphore row stays locked until the caller's transaction
            # ends (see Semaphore.objects.acquire).
            if semaphores.take_slot_for(job, limit, now):
                ready.append(job)
            elif limit.on_conflict == "discard":
                discarded.append((job, limit))
            else:
                blocked.append((job, now + slot_duration(limit, job.backend_name)))
        if ready:
            ReadyExecution.objects.using(self.db).create_all_for(ready, now)
        if blocked:
            BlockedExecution.objects.using(self.db).create_all_for(blocked, now)
        if discarded:
            self._discard(discarded, now)
        return {
            **{job.pk: State.READY for job in ready},
            **{job.pk: State.BLOCKED for job, _ in blocked},
            **{job.pk: State.FAILED for job, _ in discarded},
        }

    def _discard(self, jobs_and_limits, now):
        jobs = []
        for job, limit in jobs_and_limits:
            job.finished_at = now
            job.errors = [
                *job.errors,
                error_payload(
                    ConcurrencyLimitDiscarded,
                    f"Not run: all {limit.to} slot(s) of the concurrency key "
                    f"{job.concurrency_key!r} were taken, and the task's limit "
                    'says on_conflict="discard".',
                ),
            ]
            jobs.append(job)
        self.model.objects.using(self.db).bulk_update(jobs, ["finished_at", "errors"])
        FailedExecution.objects.using(self.db).create_all_for(jobs, now)
        Batch.objects.using(self.db).count_ended(failed=jobs)


def _may_discard(limit):
    """Whether a job under this ConcurrencyLimit (or None) may be discarded."""
    return limit is not None and limit.on_conflict == "discard"

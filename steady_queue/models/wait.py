"""Wait: a parked job's wait for an event or for the end of a durable sleep."""

from dataclasses import replace
from datetime import timedelta

from django.db import models
from django.db.models import Count, Q

# The models that import this module, read through their package when called.
from .. import models as models_package
from ..conf import options_of_backend
from ..conf.options import Options
from ..dialects.isolation import atomic
from ..pipeline.outcome import FOREVER
from .base import QueueQuerySet, RowBusy
from .step import EVENT, SLEEP, TIMEOUT

# An event's lock held by another transaction as a run parks on it: the job
# is not parked but runs again after this long.
BUSY = object()
BUSY_RETRY = timedelta(seconds=1)


def event_retention(backend_name):
    """How long an emitted event is received by waiters that begin later."""
    options = options_of_backend(backend_name)
    seconds = (options or Options()).event_retention
    return timedelta(seconds=seconds)


def received(found, backend_name, since):
    """Whether an event row's ``(payload, emitted_at, backend_name)`` is an
    emission a waiter of ``backend_name`` that began at ``since`` receives."""
    _, emitted_at, emitted_through = found
    if emitted_at is None or emitted_at < since:
        return False
    return emitted_through == backend_name


class WaitQuerySet(QueueQuerySet):
    def park_all(self, outcomes, now):
        """Record the waits of parked outcomes; return the outcomes, each
        parked one with the time its job runs again.

        Runs inside the finish's transaction, after the claims were deleted.
        A wait whose event was emitted within its retention (before the run
        began to wait, or while it was finishing) is not recorded: the event
        is received now, as a step, and the job runs again at once.
        """
        parked = [outcome for outcome in outcomes if outcome.parked is not None]
        if not parked:
            return outcomes
        steps = models_package.Step.objects.using(self.db)
        events = models_package.Event.objects.using(self.db)
        # Every event row locked first, in name order: two finishes parking
        # on the same events cannot deadlock.
        names = sorted({o.parked.event_name for o in parked} - {None})
        emitted = {}
        for name in names:
            try:
                # Not waited for: an emit holds it for as long as its caller's
                # transaction stays open, and this finish holds a batch of
                # other jobs' outcomes (and its worker) meanwhile.
                emitted[name] = events.lock_name(name, now, wait=False)
            except RowBusy:
                emitted[name] = BUSY
        run_at = {}
        for outcome in parked:
            wait = outcome.parked
            job = outcome.job
            if wait.event_name is not None:
                if steps.filter(job_id=job.pk, name=wait.step_name).exists():
                    # An emit released this wait while the job ran.
                    run_at[job.pk] = now
                    continue
                found = emitted[wait.event_name]
                if found is BUSY:
                    # Not parked: the job runs again shortly and its wait
                    # decides again, by then seeing the emit or its rollback.
                    run_at[job.pk] = now + BUSY_RETRY
                    continue
                since = now - event_retention(job.backend_name)
                if found is not None and received(found, job.backend_name, since):
                    steps.record(job.pk, wait.step_name, EVENT, found[0], now)
                    run_at[job.pk] = now
                    continue
            self.filter(job_id=job.pk).delete_rows()
            self.insert_one(
                self.model(
                    job_id=job.pk,
                    step_name=wait.step_name,
                    event_name=wait.event_name,
                    until=wait.until,
                    created_at=now,
                )
            )
            run_at[job.pk] = wait.until or FOREVER
        return [
            replace(o, retry_at=run_at[o.job.pk]) if o.parked is not None else o
            for o in outcomes
        ]

    def waiting_for(self, backend_name, name):
        """The waits of the jobs of the backend alias ``backend_name`` for the
        event ``name``."""
        jobs = models_package.Job.objects.using(self.db)
        return self.filter(
            event_name=name, job_id__in=jobs.filter(backend_name=backend_name)
        )

    def release_for(self, backend_name, name, now):
        """Release every job of the backend alias ``backend_name`` waiting for
        the event ``name``: record the event as each one's wait step, delete
        the waits and make the jobs ready (through their concurrency limits);
        return their ids. The payload is read from the event's row, which the
        caller wrote.

        In the caller's transaction, which holds the event's row lock. Each
        wait row is deleted by whoever locks it first (this emit, or the job's
        own timeout): no waiter is released twice.
        """
        waits = self.waiting_for(backend_name, name)
        waits = waits.select_for_update().order_by("job_id")
        found = list(waits.values_list("job_id", flat=True))
        if not found:
            return []
        steps = models_package.Step.objects.using(self.db)
        steps.record_received(backend_name, name, now)
        self.filter(job_id__in=found).delete_rows()
        scheduled = models_package.ScheduledExecution.objects.using(self.db)
        # A job not parked any more (woken early, or by its timeout, and
        # running) finds its step when it comes to the wait.
        scheduled.filter(job_id__in=found).make_ready_now()
        return sorted(found)

    def end(self, job_id, step_name, kind, now):
        """End a job's own wait whose time has come (a timeout, a sleep's end):
        record it as a step of ``kind`` and delete the wait; True if done.

        False if the wait was gone: an emit released it first, and recorded
        the event as the step.
        """
        with atomic(using=self.db):
            # Deleting locks the row: an emit releasing it meanwhile is waited
            # for, and then the row is gone. A write first, too, which SQLite
            # needs to wait for its lock rather than fail (models/event.py).
            if not self.filter(job_id=job_id, step_name=step_name).delete_rows():
                return False
            steps = models_package.Step.objects.using(self.db)
            steps.record(job_id, step_name, kind, None, now)
        return True

    def time_out(self, job_id, step_name, now):
        """Record a wait for an event as timed out (Wait.end)."""
        return self.end(job_id, step_name, TIMEOUT, now)

    def wake(self, job_id, step_name, now):
        """Record a durable sleep as slept (Wait.end)."""
        return self.end(job_id, step_name, SLEEP, now)

    def parked(self):
        """The waits of jobs parked now (in the scheduled table): not those of
        a job woken early and running, or failed there."""
        scheduled = models_package.ScheduledExecution.objects.using(self.db)
        return self.filter(job_id__in=scheduled.values("job_id"))

    def counts(self):
        """{"event": parked jobs waiting for events, "sleep": parked jobs
        sleeping}."""
        return self.parked().aggregate(
            event=Count("pk", filter=Q(event_name__isnull=False)),
            sleep=Count("pk", filter=Q(event_name=None)),
        )


class Wait(models.Model):
    """What a parked job waits for: an event (until a timeout, or for ever),
    or the end of a durable sleep. One per job at most.

    The job itself sits in the scheduled table, at ``until`` (or never, for
    an event without a timeout): it holds no worker, connection or slot.
    """

    job = models.OneToOneField(
        "steady_queue.Job",
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        primary_key=True,
        related_name="+",
    )
    step_name = models.CharField(max_length=200)
    # None: a durable sleep.
    event_name = models.CharField(max_length=200, null=True, blank=True)
    # When the wait ends anyway: a timeout, or a sleep's end. None: never.
    until = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()

    objects = WaitQuerySet.as_manager()

    class Meta:
        db_table = "steady_queue_waits"
        indexes = [models.Index(fields=["event_name"], name="sq_wait_event")]

    def __str__(self):
        if self.event_name is None:
            return f"Job {self.job_id} sleeps until {self.until}"
        return f"Job {self.job_id} waits for {self.event_name!r}"

"""ScheduledExecution: jobs waiting for their run_after time."""

from datetime import timedelta

from django.db import models
from django.utils import timezone

# The models that import this module, read through their package when called.
from .. import models as models_package
from ..dialects.isolation import atomic
from .execution import Execution, ExecutionQuerySet
from .ready_execution import ReadyExecution


class ScheduledExecutionQuerySet(ExecutionQuerySet):
    def create_for(self, job):
        """Hold a saved job until its scheduled time."""
        return self.insert_one(
            self.model(
                job=job,
                queue_name=job.queue_name,
                priority=job.priority,
                scheduled_at=job.scheduled_at,
                created_at=job.enqueued_at,
            )
        )

    def create_all_for(self, jobs, now=None):
        """Hold saved jobs until their scheduled times, in one insert."""
        return self.create_all_at(
            [(job, job.scheduled_at) for job in jobs], now or timezone.now()
        )

    def create_all_at(self, jobs_and_times, now):
        """Hold saved jobs until the given times (retries: not their own), in one
        insert."""
        return self.bulk_create(
            [
                self.model(
                    job_id=job.pk,
                    queue_name=job.queue_name,
                    priority=job.priority,
                    scheduled_at=scheduled_at,
                    created_at=now,
                )
                for job, scheduled_at in jobs_and_times
            ]
        )

    def due(self, now=None):
        """Scheduled jobs whose time has come, earliest first."""
        return self.filter(scheduled_at__lte=now or timezone.now()).order_by(
            "scheduled_at", "-priority", "job_id"
        )

    def due_at(self, job_id):
        """When a job's scheduled row makes it ready (a retry's wait, a
        snooze, a run_after), or None if it has none. Takes no lock."""
        return self.filter(job_id=job_id).values_list("scheduled_at", flat=True).first()

    def postpone(self, job_id, quiet, max_wait=None):
        """Move a scheduled job's time to ``quiet`` seconds from now, no
        later than ``max_wait`` seconds after it was enqueued; return whether
        it was still scheduled here, not yet due, and never started. From
        now, not from when the call was made: enqueue_many makes every
        call's job before writing the first.

        In the caller's transaction. Its row is locked, skipping it if a
        dispatcher holds it (about to make it ready): then False, and the
        job goes its way. Locked by this, the row is skipped by dispatchers
        until the caller commits, by when its new time is written. A row
        already due is left alone: under a stream of enqueues it would be
        locked by one or another most of the time, and a dispatcher, which
        skips locked rows, would run it late. A job that ran (waiting for
        its retry, or snoozed) keeps its time: a burst ends at its first run.
        """
        jobs = models_package.Job.objects.using(self.db).filter(pk=job_id)
        # Read apart from the lock below (a join would lock the job's row
        # too): a job with a scheduled row is not running, so its start
        # cannot change until a dispatcher, which needs that lock, moves it.
        if jobs.filter(started_at__isnull=False).exists():
            return False
        now = timezone.now()
        rows = self.filter(job_id=job_id, scheduled_at__gt=now)
        found = rows.skip_locked().values_list("pk").first()
        if found is None:
            return False
        due_at = now + timedelta(seconds=quiet)
        if max_wait is not None:
            enqueued_at = jobs.values_list("enqueued_at", flat=True).first()
            due_at = min(due_at, enqueued_at + timedelta(seconds=max_wait))
        self.filter(pk=found[0]).update(scheduled_at=due_at)
        jobs.update(scheduled_at=due_at)
        return True

    def dispatch_next_batch(self, batch_size):
        """Dispatch up to ``batch_size`` due jobs; return how many left this table.

        Limited jobs pass their limits now (a concurrency slot, room in a
        rate window), or are blocked (or discarded) as they would have been
        if enqueued at this moment.
        """
        now = timezone.now()
        with atomic(using=self.db):
            rows = self.due(now).pop_batch(
                batch_size, ["job", "queue_name", "priority"]
            )
            if not rows:
                return 0
            # Every alias's due jobs: each ready row is stamped with the alias
            # its job was enqueued through, whose workers alone claim it.
            jobs = models_package.Job.objects.using(self.db).filter(
                pk__in=[row[0] for row in rows]
            )
            found = list(
                jobs.values_list(
                    "pk", "backend_name", "fair_key", "concurrency_key", "limit_keys"
                )
            )
            # Each job's alias and tenant (fair key), which its ready row copies.
            copied = {
                pk: (backend_name, fair_key) for pk, backend_name, fair_key, *_ in found
            }
            limited_ids = {pk for pk, _, _, key, more in found if key or more}
            ReadyExecution.objects.using(self.db).create_all_from(
                [
                    (job_id, queue_name, priority, *copied[job_id])
                    for job_id, queue_name, priority in rows
                    if job_id not in limited_ids
                ],
                now,
            )
            if limited_ids:
                limited = list(jobs.filter(pk__in=limited_ids))
                models_package.Job.objects.using(self.db).dispatch_all(limited, now)
        return len(rows)

    def held_handbacks(self, grace=None):
        """Return ``(job id, queue, backend alias, scheduled at, handbacks)``
        of the scheduled jobs a worker handed back; with ``grace``, only
        those due within it (a held handback is due at most that far on:
        processes/handback.py). One read, no lock; the caller picks the holds
        among them."""
        rows = self.filter(job__handbacks__isnull=False)
        if grace is not None:
            until = timezone.now() + timedelta(seconds=grace + 60)
            rows = rows.filter(scheduled_at__lte=until)
        return list(
            rows.order_by().values_list(
                "job_id",
                "queue_name",
                "job__backend_name",
                "scheduled_at",
                "job__handbacks",
            )
        )

    def make_ready_now(self):
        """Dispatch these scheduled jobs now, ahead of their time; return ids.

        Through their concurrency limits, as the dispatcher would at their
        time: a limited job takes a free slot, or is blocked (or discarded)
        when none is free. Only a blocked job's "run now" forces past a limit.
        """
        with atomic(using=self.db):
            ids = [row[0] for row in self.delete_returning(["job"])]
            jobs = list(models_package.Job.objects.using(self.db).filter(pk__in=ids))
            models_package.Job.objects.using(self.db).dispatch_all(jobs, timezone.now())
        return ids


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

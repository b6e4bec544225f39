"""Step: the stored outcome of one named durable step (or wait) of a job."""

from django.db import IntegrityError, models
from django.utils import timezone

# The models that import this module, read through their package when called.
from .. import models as models_package
from ..dialects.isolation import atomic
from .base import QueueQuerySet
from .fields import RowJSONField

# What a step row records: a step() that returned; a wait_for_event() that
# received its event, or timed out; a durable_sleep() that slept.
STEP = "step"
EVENT = "event"
TIMEOUT = "timeout"
SLEEP = "sleep"
KINDS = [(STEP, "step"), (EVENT, "event"), (TIMEOUT, "timeout"), (SLEEP, "sleep")]

# The step of every job waiting for an event, its value the event's payload
# copied by the server from the row the emit wrote: the payload crosses the
# wire once however many jobs wait. (A row per waiter, each with a copy, made
# one statement larger than MariaDB's max_allowed_packet from 20 waiters of
# 1 MB, and cost PostgreSQL 18 s and the emitting process 326 MiB for 1,000
# waiters of 100 kB.)
RECORD_RECEIVED_SQL = (
    "INSERT INTO {steps} (job_id, name, kind, value, finished_at) "
    "SELECT w.job_id, w.step_name, %s, e.payload, %s "
    "FROM {waits} w JOIN {jobs} j ON j.id = w.job_id "
    "JOIN {events} e ON e.name = w.event_name "
    "WHERE w.event_name = %s AND j.backend_name = %s"
)


class StepQuerySet(QueueQuerySet):
    def of_job(self, job_id):
        """The stored steps of one job, in the order they finished."""
        return self.filter(job_id=job_id).order_by("finished_at", "pk")

    def of_jobs(self, jobs):
        """The stored steps of a Job queryset's jobs."""
        return self.filter(job_id__in=jobs.values("pk"))

    def by_name(self, job_id):
        """{name: Step} of one job's stored steps."""
        return {step.name: step for step in self.of_job(job_id)}

    def stored(self, job_id, name):
        """The stored step ``name`` of one job, or None; a plain read, which
        sees every step committed before it (an emit's included)."""
        return self.filter(job_id=job_id, name=name).first()

    def record(self, job_id, name, kind, value, now=None):
        """Store a finished step in its own transaction (or the caller's
        savepoint); return the Step.

        Two records of one name for one job cannot both commit: the second
        raises IntegrityError (the pair is unique).
        """
        step = self.model(
            job_id=job_id,
            name=name,
            kind=kind,
            value=value,
            finished_at=now or timezone.now(),
        )
        with atomic(using=self.db):
            self.insert_one(step)
        return step

    def record_once(self, job_id, name, kind, value, now):
        """Store a finished step unless one of that name is stored already;
        return the Step stored (this one, or the one found).

        For a wait's step, which an emit may record in another transaction as
        the run records it: the first to commit wins, and the other reads
        what it stored (the duplicate key waits for that commit), so a run
        receives the one event its wait was released with.
        """
        try:
            return self.record(job_id, name, kind, value, now)
        except IntegrityError:
            return self.get(job_id=job_id, name=name)

    def record_received(self, backend_name, name, now):
        """Store the event ``name``, as its row holds it, as the step of every
        job of the backend alias ``backend_name`` waiting for it (the waits of
        WaitQuerySet.waiting_for), in one statement; return how many.

        In the caller's transaction, which holds the event's row lock and the
        waits' (WaitQuerySet.release_for): the waits it reads are the ones
        locked, and the payload is the one the emit just wrote.
        """
        table = self.connection.ops.quote_name
        sql = RECORD_RECEIVED_SQL.format(
            steps=table(self.model._meta.db_table),
            waits=table(models_package.Wait._meta.db_table),
            events=table(models_package.Event._meta.db_table),
            jobs=table(models_package.Job._meta.db_table),
        )
        finished_at = self.model._meta.get_field("finished_at")
        finished_at = finished_at.get_db_prep_save(now, self.connection)
        params = [EVENT, finished_at, name, backend_name]
        with self.connection.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.rowcount

    def counts_by_kind(self):
        """{kind: rows}: how many steps, waits and sleeps are stored."""
        rows = self.values_list("kind").annotate(count=models.Count("pk"))
        return dict(rows.order_by())


class Step(models.Model):
    """One finished step of a job: its name, what it returned, and when.

    Deleted with its job (JobQuerySet.delete_rows); no foreign-key constraint,
    as the jobs table has none pointing at it either: clearing jobs pays for
    no check.
    """

    job = models.ForeignKey(
        "steady_queue.Job",
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,  # the unique (job, name) pair serves look-ups by job
        related_name="+",
    )
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=10, choices=KINDS, default=STEP)
    # As a return value is stored (pipeline/return_values.py) for a step; the
    # event's payload (plain JSON) for a wait that received it.
    value = RowJSONField(null=True, blank=True)
    finished_at = models.DateTimeField()

    objects = StepQuerySet.as_manager()

    class Meta:
        db_table = "steady_queue_steps"
        constraints = [
            models.UniqueConstraint(fields=["job", "name"], name="sq_step_job_name")
        ]

    def __str__(self):
        return f"Step {self.name!r} of job {self.job_id} ({self.kind})"

"""Job: the durable row behind every TaskResult."""

import json

from django.db import models, transaction
from django.db.models import Exists, OuterRef, Subquery
from django.utils import timezone

from ..dialects import retrying_lock_conflicts
from ..exceptions import DuplicateTaskError
from .base import READY_CHANNEL, QueueQuerySet
from .fields import RowJSONField

# Enqueue on PostgreSQL in one round trip: the job and its execution row are
# written by one statement, which is atomic on its own and needs no BEGIN/COMMIT.
INSERT_JOB_AND_EXECUTION_SQL = """
WITH job AS (
    INSERT INTO steady_queue_jobs
        (queue_name, task_path, arguments, priority, backend_name, scheduled_at,
         enqueued_at, concurrency_key, errors, worker_ids)
    VALUES (%s, %s, %s::jsonb, %s, %s, %s, %s, %s, '[]'::jsonb, '[]'::jsonb)
    RETURNING id, queue_name, priority, scheduled_at, enqueued_at
),
execution AS (
    INSERT INTO {table} (job_id, queue_name, priority, created_at{extra_columns})
    SELECT id, queue_name, priority, enqueued_at{extra_columns} FROM job
    RETURNING job_id, queue_name
)
SELECT job_id{notify} FROM execution
"""
# A ready job is announced to listening workers (delivered at commit).
INSERT_READY_SQL = INSERT_JOB_AND_EXECUTION_SQL.format(
    table="steady_queue_ready_executions",
    extra_columns="",
    notify=f", pg_notify('{READY_CHANNEL}', queue_name)",
)
INSERT_SCHEDULED_SQL = INSERT_JOB_AND_EXECUTION_SQL.format(
    table="steady_queue_scheduled_executions",
    extra_columns=", scheduled_at",
    notify="",
)

# Bulk enqueue on PostgreSQL: one statement per batch for both tables. Rows are
# inserted in input order, so the ids returned, sorted, match the input.
INSERT_JOBS_AND_EXECUTIONS_SQL = """
WITH input AS (
    SELECT * FROM unnest(
        %s::varchar[], %s::varchar[], %s::smallint[], %s::varchar[],
        %s::timestamptz[], %s::timestamptz[], %s::varchar[]
    ) WITH ORDINALITY
    AS input(queue_name, task_path, priority, backend_name, scheduled_at,
             enqueued_at, concurrency_key, position)
    -- Arguments travel as one JSON array: cheaper than an array of jsonb.
    JOIN jsonb_array_elements(%s::jsonb) WITH ORDINALITY
    AS arguments(arguments, position) USING (position)
),
job AS (
    INSERT INTO steady_queue_jobs
        (queue_name, task_path, arguments, priority, backend_name, scheduled_at,
         enqueued_at, concurrency_key, errors, worker_ids)
    SELECT queue_name, task_path, arguments, priority, backend_name, scheduled_at,
           enqueued_at, concurrency_key, '[]'::jsonb, '[]'::jsonb
    FROM input ORDER BY position
    RETURNING id, queue_name, priority, scheduled_at, enqueued_at
),
ready AS (
    INSERT INTO steady_queue_ready_executions (job_id, queue_name, priority, created_at)
    SELECT id, queue_name, priority, enqueued_at FROM job
    WHERE scheduled_at IS NULL OR scheduled_at <= enqueued_at
    RETURNING queue_name
),
scheduled AS (
    INSERT INTO steady_queue_scheduled_executions
        (job_id, queue_name, priority, created_at, scheduled_at)
    SELECT id, queue_name, priority, enqueued_at, scheduled_at FROM job
    WHERE scheduled_at > enqueued_at
)
SELECT id, (
    SELECT count(pg_notify('{channel}', name))
    FROM (SELECT DISTINCT queue_name FROM ready) AS queues(name)
) FROM job ORDER BY id
""".replace("{channel}", READY_CHANNEL)


# The job fields a finished (or failed) run writes; see Outcome.apply_to.
OUTCOME_FIELDS = [
    "finished_at",
    "started_at",
    "last_attempted_at",
    "worker_ids",
    "return_value",
    "errors",
]


class JobQuerySet(QueueQuerySet):
    def enqueue(self, job):
        """Insert an unsaved job and its ready, scheduled or blocked execution."""
        if job.needs_concurrency_slot or job.unique_key:
            return self._with_lock_retries(self._enqueue_each, [job])[0]
        if self.dialect.runs_hot_paths_in_one_statement:
            return self._enqueue_in_one_statement(job)
        # savepoint=False: inside the caller's atomic() this adds no SAVEPOINT
        # round trips; a failure still rolls back with the caller's transaction.
        with transaction.atomic(using=self.db, savepoint=False):
            job.save(using=self.db, force_insert=True)
            job.execution_class().objects.using(self.db).create_for(job)
        return job

    def _enqueue_each(self, jobs):
        """Enqueue jobs that take a unique key or a concurrency slot, in order.

        Returns the jobs, where a duplicate of a pending @unique job is
        replaced by that pending job (marked ``merged``). Raises
        DuplicateTaskError, having written nothing, for a duplicate whose task
        refuses them. A savepoint: a refusal inside the caller's atomic() leaves
        the caller's transaction usable.
        """
        from .unique_key import UniqueKey

        enqueued = {}
        # In key order: concurrent enqueues lock the same unique-key and
        # semaphore rows in the same order, so they cannot deadlock each other.
        in_lock_order = sorted(
            range(len(jobs)),
            key=lambda i: (jobs[i].unique_key or "", jobs[i].concurrency_key or ""),
        )
        with transaction.atomic(using=self.db):
            for position in in_lock_order:
                job = jobs[position]
                job.save(using=self.db, force_insert=True)
                holder = None
                if job.unique_key:
                    keys = UniqueKey.objects.using(self.db)
                    holder = keys.take(job.unique_key, job.pk)
                if holder is None:
                    # Routed at once: a later duplicate in this batch must find
                    # this job pending.
                    self.route([job])
                    enqueued[position] = job
                    continue
                # Saved first because the key row names a job; dropped again.
                self.filter(pk=job.pk).delete_rows()
                if job.unique.on_duplicate == "refuse":
                    raise DuplicateTaskError(job, holder)
                merged = self.get(pk=holder)
                merged.merged = True
                enqueued[position] = merged
        return [enqueued[position] for position in range(len(jobs))]

    def _with_lock_retries(self, function, jobs):
        # A deadlock (MySQL) rolls back the whole transaction: it can be run again
        # only when it is our own, not when enqueue joined the caller's atomic().
        if self.connection.in_atomic_block:
            return function(jobs)

        def attempt(jobs):
            for job in jobs:
                job.pk = None
                job._state.adding = True
            return function(jobs)

        return retrying_lock_conflicts(attempt, jobs)

    def route(self, jobs, now=None):
        """Give saved jobs their first execution row: scheduled, or dispatched now."""
        from .scheduled_execution import ScheduledExecution

        scheduled = [job for job in jobs if job.is_scheduled]
        if scheduled:
            ScheduledExecution.objects.using(self.db).create_all_for(scheduled, now)
        return self.dispatch_all([job for job in jobs if not job.is_scheduled], now)

    def dispatch_all(self, jobs, now=None):
        """Make saved jobs ready, unless their concurrency key has no free slot.

        A job that finds no slot is blocked until one is released, or, if its
        limit says on_conflict="discard", recorded as failed without running.
        Runs in the caller's transaction; returns the jobs made ready.
        """
        from .blocked_execution import BlockedExecution
        from .ready_execution import ReadyExecution

        now = now or timezone.now()
        ready, blocked, discarded = [], [], []
        # Sorted by key: transactions taking several semaphores take them in
        # the same order, so they cannot deadlock on each other.
        for job in sorted(jobs, key=lambda job: job.concurrency_key or ""):
            if job.take_concurrency_slot(now, using=self.db):
                ready.append(job)
            elif job.concurrency_limit().on_conflict == "discard":
                discarded.append(job)
            else:
                duration = job.concurrency_limit().duration_for(job.backend_name)
                blocked.append((job, now + duration))
        if ready:
            ReadyExecution.objects.using(self.db).create_all_for(ready, now)
        if blocked:
            BlockedExecution.objects.using(self.db).create_all_for(blocked, now)
        if discarded:
            self._discard(discarded, now)
        return ready

    def _discard(self, jobs, now):
        from ..exceptions import ConcurrencyLimitDiscarded, error_payload
        from .failed_execution import FailedExecution

        for job in jobs:
            limit = job.concurrency_limit()
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
        self.model.objects.using(self.db).bulk_update(jobs, ["finished_at", "errors"])
        FailedExecution.objects.using(self.db).create_all_for(jobs, now)

    def _enqueue_in_one_statement(self, job):
        sql = INSERT_SCHEDULED_SQL if job.is_scheduled else INSERT_READY_SQL
        rows = self.run_prepared(
            sql,
            [
                job.queue_name,
                job.task_path,
                json.dumps(job.arguments),
                job.priority,
                job.backend_name,
                job.scheduled_at,
                job.enqueued_at,
                job.concurrency_key,
            ],
        )
        job.pk = rows[0][0]
        job._state.adding = False
        job._state.db = self.db
        return job

    def select_by_ids(self, ids):
        """Raw rows of every column of these jobs (for instances_from_rows)."""
        meta = self.model._meta
        quote = self.connection.ops.quote_name
        sql = (
            f"SELECT {self.model.select_columns(quote(meta.db_table))} "
            f"FROM {quote(meta.db_table)} "
            f"WHERE {quote(meta.pk.column)} IN ({', '.join(['%s'] * len(ids))})"
        )
        with self.connection.cursor() as cursor:
            cursor.execute(sql, list(ids))
            return cursor.fetchall()

    def save_outcomes(self, jobs, without=()):
        """Write the outcome fields of these jobs: one UPDATE by primary key each.

        Sent with executemany: Django's bulk_update builds a CASE expression per
        field and job, which on the hot path costs far more than the database
        work it saves (PostgreSQL has its own one-statement finalize).
        """
        meta = self.model._meta
        fields = [
            meta.get_field(name) for name in OUTCOME_FIELDS if name not in without
        ]
        quote = self.connection.ops.quote_name
        assignments = ", ".join(f"{quote(field.column)} = %s" for field in fields)
        sql = (
            f"UPDATE {quote(meta.db_table)} SET {assignments} "
            f"WHERE {quote(meta.pk.column)} = %s"
        )
        rows = [
            [
                field.get_db_prep_save(getattr(job, field.attname), self.connection)
                for field in fields
            ]
            + [job.pk]
            for job in jobs
        ]
        with self.connection.cursor() as cursor:
            cursor.executemany(sql, rows)

    def enqueue_batch_size(self, limit=1000):
        """How many jobs one multi-row insert can carry on this database."""
        fields = self.model._meta.concrete_fields
        # Backends without a parameter limit answer "all of them": len(objs).
        fitting = self.connection.ops.bulk_batch_size(fields, [None] * limit)
        return max(1, min(limit, fitting))

    def enqueue_all(self, jobs, batch_size=None):
        """Insert unsaved jobs and their executions: one insert per table per batch."""
        batch_size = batch_size or self.enqueue_batch_size()
        saved = []
        for start in range(0, len(jobs), batch_size):
            batch = jobs[start : start + batch_size]
            if any(job.needs_concurrency_slot or job.unique_key for job in batch):
                saved.extend(self._with_lock_retries(self._enqueue_each, batch))
                continue
            if self.dialect.runs_hot_paths_in_one_statement:
                saved.extend(self._enqueue_batch_in_one_statement(batch))
                continue
            with transaction.atomic(using=self.db, savepoint=False):
                if self.connection.features.can_return_rows_from_bulk_insert:
                    batch = self.bulk_create(batch)
                else:
                    # MySQL cannot return the new ids of a multi-row insert.
                    for job in batch:
                        job.save(using=self.db, force_insert=True)
                for execution_class in {job.execution_class() for job in batch}:
                    execution_class.objects.using(self.db).create_all_for(
                        [
                            job
                            for job in batch
                            if job.execution_class() is execution_class
                        ]
                    )
            saved.extend(batch)
        return saved

    def _enqueue_batch_in_one_statement(self, batch):
        columns = [
            [job.queue_name for job in batch],
            [job.task_path for job in batch],
            [job.priority for job in batch],
            [job.backend_name for job in batch],
            [job.scheduled_at for job in batch],
            [job.enqueued_at for job in batch],
            [job.concurrency_key for job in batch],
            json.dumps([job.arguments for job in batch]),
        ]
        rows = self.run_prepared(INSERT_JOBS_AND_EXECUTIONS_SQL, columns)
        for job, (pk, _) in zip(batch, rows, strict=True):
            job.pk = pk
            job._state.adding = False
            job._state.db = self.db
        return batch

    def with_state(self):
        """Annotate each job with its claim (time, process) and whether it failed."""
        from .claimed_execution import ClaimedExecution
        from .failed_execution import FailedExecution
        from .process import Process

        claims = ClaimedExecution.objects.filter(job=OuterRef("pk"))
        return self.annotate(
            claimed_at=Subquery(claims.values("created_at")[:1]),
            claimed_by_process=Subquery(claims.values("process_id")[:1]),
            has_failed=Exists(FailedExecution.objects.filter(job=OuterRef("pk"))),
        ).annotate(
            claimed_by=Subquery(
                Process.objects.filter(pk=OuterRef("claimed_by_process")).values(
                    "name"
                )[:1]
            ),
        )

    def finished(self):
        """Jobs that ran to success (failed jobs keep a FailedExecution instead)."""
        from .failed_execution import FailedExecution

        return self.filter(finished_at__isnull=False).exclude(
            Exists(FailedExecution.objects.filter(job=OuterRef("pk")))
        )

    def finished_before(self, cutoff):
        """Successful jobs that finished before ``cutoff`` (what clearing deletes)."""
        return self.finished().filter(finished_at__lt=cutoff)

    def clear_finished(self, finished_before, batch_size=500, progress=None):
        """Delete successful jobs that finished before a time; return how many.

        A batch per statement; ``progress(n)`` is called after each.
        """
        deleted = 0
        while True:
            ids = list(
                self.finished_before(finished_before).values_list("pk", flat=True)[
                    :batch_size
                ]
            )
            if not ids:
                return deleted
            # Finished jobs have no execution rows left to cascade to.
            count = self.model.objects.using(self.db).filter(pk__in=ids).delete_rows()
            deleted += count
            if progress is not None:
                progress(count)


class Job(models.Model):
    """One enqueued call of a task, kept until cleared."""

    queue_name = models.CharField(max_length=100)
    task_path = models.CharField(max_length=255)
    arguments = RowJSONField(default=dict)
    priority = models.SmallIntegerField(default=0)
    backend_name = models.CharField(max_length=100, default="default")
    scheduled_at = models.DateTimeField(null=True, blank=True)
    enqueued_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    last_attempted_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    return_value = RowJSONField(null=True, blank=True)
    errors = RowJSONField(default=list, blank=True)
    worker_ids = RowJSONField(default=list, blank=True)
    concurrency_key = models.CharField(max_length=255, null=True, blank=True)

    objects = JobQuerySet.as_manager()

    class Meta:
        db_table = "steady_queue_jobs"
        # Every index here is rewritten when a job finishes: keep only what
        # clearing finished jobs needs.
        indexes = [models.Index(fields=["finished_at"], name="sq_job_finished")]
        # What operators may do in the admin; viewing needs only view_job.
        permissions = [
            ("retry_job", "Can retry failed jobs"),
            ("discard_job", "Can discard failed and scheduled jobs"),
            ("run_job_now", "Can run scheduled, blocked and recurring jobs now"),
        ]

    def __str__(self):
        return f"Job {self.pk} ({self.task_path})"

    @classmethod
    def select_columns(cls, alias):
        """Every column, qualified by a table alias, for hand-written SELECTs."""
        return ", ".join(
            f"{alias}.{field.column}" for field in cls._meta.concrete_fields
        )

    @property
    def args(self):
        return self.arguments.get("args", [])

    @property
    def kwargs(self):
        return self.arguments.get("kwargs", {})

    @property
    def is_scheduled(self):
        return self.scheduled_at is not None and self.scheduled_at > self.enqueued_at

    def claimed(self, at):
        """Mark this in-memory job as claimed at a time (the attempt's start)."""
        self.claimed_at = at
        return self

    # Set by the backend for a @unique task's call (not stored on the job row).
    unique = None
    unique_key = None

    @property
    def needs_concurrency_slot(self):
        """Whether this job must take a concurrency slot before it runs now."""
        return bool(self.concurrency_key) and not self.is_scheduled

    def concurrency_limit(self):
        """The @limits_concurrency of this job's task, or None if it has none."""
        if not self.concurrency_key:
            return None
        if not hasattr(self, "_concurrency_limit"):
            from ..decorators.concurrency import limit_for_path

            self._concurrency_limit = limit_for_path(self.task_path)
        return self._concurrency_limit

    def take_concurrency_slot(self, now, using=None):
        """Take a slot of this job's concurrency key; True if free or unlimited.

        Must run inside a transaction: the semaphore row stays locked until it
        ends (see Semaphore.objects.acquire).
        """
        from .semaphore import Semaphore

        limit = self.concurrency_limit()
        if limit is None:
            return True
        return Semaphore.objects.using(using or self._state.db).acquire(
            self.concurrency_key, limit.to, limit.duration_for(self.backend_name), now
        )

    def execution_class(self):
        """Return the execution model a newly enqueued job starts in."""
        from .ready_execution import ReadyExecution
        from .scheduled_execution import ScheduledExecution

        return ScheduledExecution if self.is_scheduled else ReadyExecution

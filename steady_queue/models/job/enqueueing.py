"""Enqueueing: writing a job row and its first execution row, singly or in bulk.

The common case takes a fast path (one statement on PostgreSQL, and on
MariaDB in autocommit; one transaction elsewhere); a job with a unique key or a
concurrency slot takes the per-job path, in lock order, retried on lock
conflicts when it owns its transaction; a job that takes a tenant's turn
(@fair) takes the transaction, which reads the turns before it writes.
"""

import json
from collections import Counter, deque
from contextlib import closing
from dataclasses import dataclass
from datetime import timedelta
from itertools import batched
from typing import Any

from django.utils import timezone

from ...dialects import retrying_own_transaction
from ...dialects.isolation import atomic
from ...exceptions import DuplicateTaskError
from ...states import State
from ..base import READY_CHANNEL, mark_saved
from ..batch import Batch
from ..blocked_execution import BlockedExecution
from ..job_dependency import JobDependency
from ..ready_execution import ReadyExecution
from ..scheduled_execution import ScheduledExecution
from ..unique_key import UniqueKey
from .bulk_columns import bulk_statement

# Enqueue on PostgreSQL in one round trip: the server-side function (migration
# 0010) writes the job and its execution row, atomic as one statement, with
# no BEGIN/COMMIT; a ready job is announced to its alias's listening workers
# (delivered at commit). Its INSERTs are planned once per connection, where
# the same statement sent as SQL was planned at every call.
ENQUEUE_SQL = """
SELECT steady_queue_enqueue(
    %s::text, %s::text, %s::jsonb, %s::integer, %s::text, %s::timestamptz,
    %s::timestamptz, %s::text, %s::bigint, %s::boolean
)
"""

# Enqueue on MariaDB in one round trip, where atomic() in autocommit costs five
# (SET AUTOCOMMIT = 0, two INSERTs, COMMIT, SET AUTOCOMMIT = 1): a compound
# statement runs the transaction on the server. Its handler rolls back and
# raises again whatever fails (a statement killed or cut off by
# max_statement_time too), so a failed enqueue leaves no row and no open
# transaction. The job's id comes back as a row (the statement reports no
# insert id), sent only once the COMMIT succeeded. Only for a connection in
# autocommit: START TRANSACTION would commit a caller's open transaction. The
# execution row takes its values as parameters: reading them back from the
# job row (INSERT ... SELECT) cost 30 µs more per enqueue (of 450).
COMPOUND_INSERT_JOB_AND_EXECUTION_SQL = """
BEGIN NOT ATOMIC
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
    START TRANSACTION;
    INSERT INTO steady_queue_jobs
        (queue_name, task_path, arguments, priority, backend_name, scheduled_at,
         enqueued_at, concurrency_key, batch_id, errors, worker_ids)
    VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, '[]', '[]');
    INSERT INTO {table} (job_id, queue_name, priority, created_at, {last_column})
    VALUES (LAST_INSERT_ID(), %s, %s, %s, %s);
    COMMIT;
    SELECT LAST_INSERT_ID();
END
"""
COMPOUND_INSERT_READY_SQL = COMPOUND_INSERT_JOB_AND_EXECUTION_SQL.format(
    table="steady_queue_ready_executions", last_column="backend_name"
)
COMPOUND_INSERT_SCHEDULED_SQL = COMPOUND_INSERT_JOB_AND_EXECUTION_SQL.format(
    table="steady_queue_scheduled_executions", last_column="scheduled_at"
)

# Bulk enqueue on PostgreSQL: one statement per chunk for both tables. Each
# column is a {placeholder}: a parameter when every job of the chunk has the same
# value (a task's calls share queue, path, priority, alias, run_after, enqueue
# time and batch), else read from the job's own entry in one JSON array, which
# carries the arguments and whatever else differs (bulk_columns.py). Rows are
# inserted in input order, so the ids returned, sorted, match the input.
INSERT_JOBS_AND_EXECUTIONS_SQL = """
WITH job AS (
    INSERT INTO steady_queue_jobs
        (queue_name, task_path, arguments, priority, backend_name, scheduled_at,
         enqueued_at, concurrency_key, batch_id, errors, worker_ids)
    SELECT {queue_name}, {task_path}, {arguments}, {priority}, {backend_name},
           {scheduled_at}, {enqueued_at}, {concurrency_key}, {batch_id},
           '[]'::jsonb, '[]'::jsonb
    FROM jsonb_array_elements(%(jobs)s::jsonb) WITH ORDINALITY AS input(entry, position)
    ORDER BY position
    RETURNING id, queue_name, priority, backend_name, scheduled_at, enqueued_at
),
ready AS (
    INSERT INTO steady_queue_ready_executions
        (job_id, queue_name, priority, backend_name, created_at)
    SELECT id, queue_name, priority, backend_name, enqueued_at FROM job
    WHERE scheduled_at IS NULL OR scheduled_at <= enqueued_at
    RETURNING backend_name
),
scheduled AS (
    INSERT INTO steady_queue_scheduled_executions
        (job_id, queue_name, priority, created_at, scheduled_at)
    SELECT id, queue_name, priority, enqueued_at, scheduled_at FROM job
    WHERE scheduled_at > enqueued_at
)
SELECT id, (
    SELECT count(pg_notify('{channel}', name))
    FROM (SELECT DISTINCT backend_name FROM ready) AS aliases(name)
) FROM job ORDER BY id
""".replace("{channel}", READY_CHANNEL)


@dataclass(slots=True)
class EnqueueRequest:
    """One call to enqueue: the unsaved job row and what its task asks of it.

    ``limits`` is the task's TaskLimits, ``unique`` its UniqueRuns and
    ``unique_key`` this call's key under it; none of them is stored on the row.
    ``batch_sized_when_sealed``: the job's batch counts its jobs when its
    block seals it (Batch.seal), not as each is enqueued. ``dependencies``
    are the (job id, run_anyway) pairs of the jobs it waits for.
    """

    job: Any  # an unsaved steady_queue.models.Job
    limits: Any = None
    unique: Any = None
    unique_key: str | None = None
    batch_sized_when_sealed: bool = False
    dependencies: tuple = ()
    # @debounce's settings, and this call's key under them.
    debounce: Any = None
    debounce_key: str | None = None

    @property
    def counts_in_batch(self):
        """Whether enqueueing this call adds one to its batch's size."""
        return bool(self.job.batch_id) and not self.batch_sized_when_sealed

    @property
    def takes_a_turn(self):
        """Whether this call's job takes turns with a tenant's (@fair): its
        ready row is written with its turn (ReadyExecution.take_turns), read
        first, which the one-statement inserts do not do."""
        return self.job.fair_key is not None

    @property
    def takes_a_lock(self):
        """Whether this call locks a unique key, a semaphore, a rate window
        or the jobs it depends on (or carries the limit keys of a later one:
        the one-statement inserts write concurrency_key alone)."""
        return (
            bool(self.dependencies)
            or self.job.must_pass_limits
            or self.job.limit_keys is not None
            or self.unique_key is not None
            or self.debounce_key is not None
        )


@dataclass(frozen=True, slots=True)
class Enqueued:
    """What an enqueue wrote: the job and the state it went to.

    ``merged`` is True when a pending run of a @unique task stands for the
    call; ``state`` is then None (that job may have moved on since).
    """

    job: Any
    state: State | None
    merged: bool = False


class Enqueueing:
    """JobQuerySet verbs that write new jobs."""

    def enqueue(self, request):
        """Write one EnqueueRequest's job and its execution row; return Enqueued."""
        if request.takes_a_lock:
            return self._with_lock_retries(self._enqueue_each, [request])[0]
        self._count_in_batches([request])
        job = request.job
        one_statement = not request.takes_a_turn
        if one_statement and self.dialect.runs_hot_paths_in_one_statement:
            self._enqueue_in_one_statement(job)
        elif one_statement and self._owns_a_compound_statement():
            self._enqueue_in_a_compound_statement(job)
        else:
            # savepoint=False: inside the caller's atomic() this adds no
            # SAVEPOINT round trips; a failure still rolls back with the
            # caller's transaction.
            with atomic(using=self.db, savepoint=False):
                self.insert_one(job)
                job.execution_class().objects.using(self.db).create_for(job)
        return Enqueued(job, _first_state(job))

    def enqueue_all(self, requests, then=None, batch_size=None, lock_free=False):
        """Write many EnqueueRequests: one insert per table per chunk.

        Returns an Enqueued per request, in order, or what ``then`` returns
        for it. ``then`` is called on a chunk's Enqueued as soon as the chunk
        is written: on PostgreSQL while the server writes the next chunk, so
        it must not use the database.

        ``lock_free``: the caller knows that no request takes a lock or a
        turn, or counts in a batch (the calls of a task without such
        settings). ``requests`` may then be a lazy iterable: on PostgreSQL a
        chunk's requests are made while the server writes the chunk before,
        so making them must not use the database nor raise (check the calls
        first: the chunks sent before would be committed).
        """
        batch_size = batch_size or self.enqueue_batch_size()
        if lock_free and self.dialect.runs_hot_paths_in_one_statement:
            written = self._enqueue_chunks_in_turn(batched(requests, batch_size))
        else:
            requests = list(requests)
            chunks = list(batched(requests, batch_size))
            if self.dialect.runs_hot_paths_in_one_statement and not any(
                request.takes_a_lock or request.takes_a_turn for request in requests
            ):
                self._count_in_batches(requests)
                written = self._enqueue_chunks_in_turn(chunks)
            else:
                written = (self._enqueue_chunk(chunk) for chunk in chunks)
        then = then or _itself
        # Closed at once if ``then`` raises: a pipeline must not outlive the call.
        with closing(written):
            return [then(enqueued) for chunk in written for enqueued in chunk]

    def _enqueue_chunk(self, chunk):
        if any(request.takes_a_lock for request in chunk):
            return self._with_lock_retries(self._enqueue_each, chunk)
        self._count_in_batches(chunk)
        if self.dialect.runs_hot_paths_in_one_statement and not any(
            request.takes_a_turn for request in chunk
        ):
            [enqueued] = self._enqueue_chunks_in_turn([chunk])
            return enqueued
        jobs = self._enqueue_batch_in_a_transaction([r.job for r in chunk])
        return [Enqueued(job, _first_state(job)) for job in jobs]

    def _enqueue_chunks_in_turn(self, chunks):
        """Write chunks of lock-free requests, one statement each; yield each
        chunk's Enqueued once it is written and the next chunk's statement is
        sent (models.base.run_prepared_overlapping). ``chunks`` may be lazy:
        each is drawn while the server writes the one before."""
        # The chunks whose statements are made, oldest first: the one whose
        # rows come next, and the one made while the server writes it.
        made = deque()

        def statements():
            for chunk in chunks:
                jobs = [request.job for request in chunk]
                made.append(jobs)
                yield bulk_statement(INSERT_JOBS_AND_EXECUTIONS_SQL, jobs)

        with closing(self.run_prepared_overlapping(statements())) as written:
            for rows in written:
                jobs = made.popleft()
                for job, (pk, _) in zip(jobs, rows, strict=True):
                    mark_saved(job, pk, self.db)
                yield [Enqueued(job, _first_state(job)) for job in jobs]

    def _count_in_batches(self, requests):
        """Count the jobs that join a batch in its size, before writing them.

        First: the batch row is locked before any unique-key or semaphore row,
        the order every transaction takes them in (models/batch.py). A batch
        only takes jobs inside its block's transaction, which also rolls this
        back if the enqueue fails.
        """
        counts = Counter(r.job.batch_id for r in requests if r.counts_in_batch)
        if counts:
            Batch.objects.using(self.db).count_added(counts)

    def enqueue_batch_size(self, limit=1000):
        """How many jobs one multi-row insert can carry on this database."""
        fields = self.model._meta.concrete_fields
        # Backends without a parameter limit answer "all of them": len(objs).
        fitting = self.connection.ops.bulk_batch_size(fields, [None] * limit)
        return max(1, min(limit, fitting))

    def _enqueue_each(self, requests):
        """Enqueue calls that take a unique key or a concurrency slot, in order.

        Returns an Enqueued per request, where a duplicate of a pending @unique
        job is that pending job, merged. Raises DuplicateTaskError, having
        written nothing, for a duplicate whose task refuses them. A savepoint:
        a refusal inside the caller's atomic() leaves the caller's transaction
        usable.
        """
        enqueued = {}
        # In key order: concurrent enqueues lock the same unique-key,
        # semaphore and rate window rows in the same order, so they cannot
        # deadlock each other.
        in_lock_order = sorted(
            range(len(requests)),
            key=lambda i: (
                requests[i].unique_key or requests[i].debounce_key or "",
                sorted(requests[i].job.concurrency_keys),
                sorted(requests[i].job.rate_keys),
            ),
        )
        # Calls without a unique key are routed together at the end: their
        # limits are decided in one pass, every semaphore and window locked
        # once, in key order, and the jobs let through in the order enqueued.
        together = []
        with atomic(using=self.db):
            # In the savepoint: a refused duplicate is not counted either.
            self._count_in_batches(requests)
            for position in in_lock_order:
                request = requests[position]
                job = request.job
                if request.debounce_key:
                    _put_off_until_quiet(job, request.debounce.quiet)
                job.save(using=self.db, force_insert=True)
                key = request.unique_key or request.debounce_key
                if not key and not request.dependencies:
                    together.append(position)
                    continue
                holder = None
                keys = UniqueKey.objects.using(self.db)
                if request.unique_key:
                    holder = keys.take(
                        request.unique_key,
                        job.pk,
                        until_finished=request.unique.until_finished,
                        expires_at=request.unique.expires_at(job.enqueued_at),
                    )
                elif request.debounce_key:
                    holder = keys.take_or_postpone(
                        request.debounce_key,
                        job.pk,
                        request.debounce.quiet,
                        request.debounce.max_wait,
                    )
                if holder is None:
                    # Routed at once: a later duplicate in this batch must find
                    # this job pending.
                    enqueued[position] = Enqueued(job, self._route_one(request))
                    continue
                # Saved first because the key row names a job; dropped again.
                self.filter(pk=job.pk).delete_rows()
                if request.counts_in_batch:
                    # Not a job of the batch: the pending run stands for it.
                    Batch.objects.using(self.db).count_added({job.batch_id: -1})
                if request.unique and request.unique.on_duplicate == "refuse":
                    raise DuplicateTaskError(job.task_path, request.unique_key, holder)
                if request.unique and request.unique.raises_priority:
                    self.raise_pending_priority(holder, job.priority)
                enqueued[position] = Enqueued(self.get(pk=holder), None, merged=True)
            together.sort()
            jobs = [requests[position].job for position in together]
            limits = {requests[p].job.pk: requests[p].limits for p in together}
            states = self.route(jobs, limits=limits) if jobs else {}
            for position in together:
                job = requests[position].job
                enqueued[position] = Enqueued(job, states[job.pk])
        return [enqueued[position] for position in range(len(requests))]

    def raise_pending_priority(self, job_id, priority):
        """Give a pending job ``priority`` if it is higher than its own: its
        row and its ready, scheduled or blocked row, which claims and
        releases order by. A job already running is left alone. Returns
        whether it was raised.

        In the caller's transaction, which holds the job's unique key: the
        execution row is raised first, so a job a worker claimed meanwhile
        (its row gone) keeps the priority it ran with.
        """
        for model in (ReadyExecution, ScheduledExecution, BlockedExecution):
            if model.objects.using(self.db).raise_priority(job_id, priority):
                self.filter(pk=job_id, priority__lt=priority).update(priority=priority)
                return True
        return False

    def _route_one(self, request):
        """Give one saved job its first execution row; return its State. A
        job with dependencies waits for them first (JobDependency.wait_for)."""
        job = request.job
        if request.dependencies:
            dependencies = JobDependency.objects.using(self.db)
            return dependencies.wait_for(job, request.dependencies, request.limits)
        return self.route([job], limits={job.pk: request.limits})[job.pk]

    def _with_lock_retries(self, function, requests):
        # Run again after a deadlock (MySQL) only when the transaction is our
        # own, not when enqueue joined the caller's atomic(); each attempt
        # inserts the jobs afresh.
        def attempt(requests):
            for request in requests:
                request.job.pk = None
                request.job._state.adding = True
            return function(requests)

        return retrying_own_transaction(self.connection, attempt, requests)

    def _owns_a_compound_statement(self):
        """Whether this enqueue runs its own transaction as one compound
        statement: on MariaDB, when no transaction is open. Inside a caller's
        atomic() (autocommit off) it joins the caller's with two INSERTs: a
        compound statement there measured no faster than two round trips."""
        connection = self.connection
        return (
            self.dialect.runs_compound_statements(connection)
            and connection.get_autocommit()
        )

    def _enqueue_in_one_statement(self, job):
        rows = self.run_prepared(
            ENQUEUE_SQL, [*self._job_row_values(job), job.is_scheduled]
        )
        mark_saved(job, rows[0][0], self.db)

    def _enqueue_in_a_compound_statement(self, job):
        adapt = self.connection.ops.adapt_datetimefield_value
        if job.is_scheduled:
            sql, last = COMPOUND_INSERT_SCHEDULED_SQL, adapt(job.scheduled_at)
        else:
            sql, last = COMPOUND_INSERT_READY_SQL, job.backend_name
        execution = [job.queue_name, job.priority, adapt(job.enqueued_at), last]
        rows = self.run_prepared(sql, [*self._job_row_values(job), *execution])
        mark_saved(job, rows[0][0], self.db)
        if not job.is_scheduled:
            # Committed by the statement: its workers are woken now.
            self.notify_ready({job.backend_name: 1})

    def _job_row_values(self, job):
        """The job row's values in the one-statement enqueues' column order."""
        adapt = self.connection.ops.adapt_datetimefield_value
        return [
            job.queue_name,
            job.task_path,
            json.dumps(job.arguments),
            job.priority,
            job.backend_name,
            adapt(job.scheduled_at),
            adapt(job.enqueued_at),
            job.concurrency_key,
            job.batch_id,
        ]

    def _enqueue_batch_in_a_transaction(self, jobs):
        with atomic(using=self.db, savepoint=False):
            if self.connection.features.can_return_rows_from_bulk_insert:
                jobs = self.bulk_create(jobs)
            else:
                # MySQL cannot return the new ids of a multi-row insert.
                for job in jobs:
                    job.save(using=self.db, force_insert=True)
            for execution_class in {job.execution_class() for job in jobs}:
                of_class = [
                    job for job in jobs if job.execution_class() is execution_class
                ]
                if execution_class is ReadyExecution:
                    ReadyExecution.objects.using(self.db).create_all_for(
                        of_class, enqueued=True
                    )
                else:
                    execution_class.objects.using(self.db).create_all_for(of_class)
        return jobs


def _itself(enqueued):
    return enqueued


def _put_off_until_quiet(job, quiet):
    """Schedule a @debounce job ``quiet`` seconds from now (or at its
    run_after, if later). Now, as it is written: enqueue_many makes every
    call's job before it writes the first, and writes them a key at a time,
    so a time taken as the call was made could be past already when the
    burst's next call is written, and that call would start a burst of its
    own."""
    quiet_at = timezone.now() + timedelta(seconds=quiet)
    job.scheduled_at = max(filter(None, (job.scheduled_at, quiet_at)))


def _first_state(job):
    """Where a job without a lock goes when enqueued: scheduled or ready."""
    return State.SCHEDULED if job.is_scheduled else State.READY

"""Recording the outcomes of runs whose claims are still held: the finish path.

On PostgreSQL a batch of successes is one statement (FINALIZE_SUCCEEDED_SQL);
failures, limited jobs and the other databases go through the ORM (_record),
where a failed run's retry policy is asked whether it runs again.
"""

import json
from contextlib import nullcontext
from dataclasses import replace
from datetime import timedelta

from django.db import DataError
from django.utils import timezone

# The models that import this module, read through their package when called.
from ... import models as models_package
from ...conf import options_of_backend
from ...decorators.retries import policy_for
from ...dialects.isolation import atomic
from ...dialects.postgresql import bigint_array
from ...exceptions import JobCancelledError, ResultNotStorableError
from ..batch import DONE_SQL as BATCH_DONE_SQL
from ..batch import Batch
from ..cancelled_run import CancelledRun
from ..job_dependency import JobDependency, ending_of
from ..job_outcomes import OUTCOME_COLUMNS, outcome_record
from ..job_tally import JobTallyDelta, tally_fields
from ..semaphore import Semaphore

# Finalize on PostgreSQL in one round trip: delete the claims this process still
# holds and write the outcomes of exactly those jobs. The new field values are
# computed in Python (Outcome.apply_to) and passed as one JSON document, a
# record per job (RECORD_COLUMNS: its id, the fields of OUTCOME_COLUMNS, the
# list the ORM path writes too, and what its tally counts). One document, not
# an array per field: psycopg's dumping of thirteen arrays cost about three
# times the client CPU of the statement sent this way. Only runs that
# succeeded come this way (failures may be retried: _finalize_all), so there
# is no failed row to write, and the jobs are either all kept or all dropped:
# one statement per case, as every CTE is planned on each call even when it
# writes nothing (dropping the two idle ones cut PostgreSQL's CPU per drained
# job by 7 %).
RECORD_COLUMNS = (
    ("job_id", "bigint"),
    *OUTCOME_COLUMNS,
    ("t_queue", "text"),
    ("t_task", "text"),
    ("t_bucket", "smallint"),
    ("t_seconds", "float8"),
    ("batch_id", "bigint"),
)
FINALIZE_SQL = """
WITH outcome AS (
    SELECT * FROM jsonb_to_recordset(%s::jsonb) AS o({columns})
),
released AS (
    DELETE FROM steady_queue_claimed_executions claim
    WHERE claim.job_id = ANY(%s::bigint[]) AND claim.process_id + 0 = %s
    RETURNING claim.job_id
),
written AS ({write}),
tallied AS (
    INSERT INTO steady_queue_job_tally_deltas
        (queue_name, task_path, status, bucket, count, seconds, created_at)
    SELECT o.t_queue, o.t_task, 'succeeded', o.t_bucket, count(*), sum(o.t_seconds),
        now()
    FROM released JOIN outcome o USING (job_id)
    GROUP BY o.t_queue, o.t_task, o.t_bucket
){count_in_batches}
"""

KEEP_FINISHED_JOBS = """
    UPDATE steady_queue_jobs job SET {assignments}
    FROM released JOIN outcome o USING (job_id)
    WHERE job.id = released.job_id
    RETURNING job.id, job.has_dependents
""".format(assignments=", ".join(f"{name} = o.{name}" for name, _ in OUTCOME_COLUMNS))

DROP_FINISHED_JOBS = """
    DELETE FROM steady_queue_jobs job USING released
    WHERE job.id = released.job_id
    RETURNING job.id, job.has_dependents
"""

# Only jobs whose worker read no dependents come this way; one enqueued as a
# dependent while the job ran set has_dependents after that read. Its row is
# written above after the enqueue's lock is released, so the flag read back
# is the latest: such a job makes the whole statement fail (the cast of a
# text to a number, which plain SQL has in place of RAISE), writing nothing,
# and the finish is done again on the ORM path, which settles dependents.
GAINED_DEPENDENTS = "steady_queue: a job gained dependents while it ran"
REFUSE_GAINED_DEPENDENTS = f"""
    SELECT CAST('{GAINED_DEPENDENTS}: job ' || id AS bigint)
    FROM written WHERE has_dependents"""

# Jobs in batches: one more array (each job's batch id), and their finishes
# counted in their batches (Batch.count_ended, in SQL). Each row returned is a
# job whose claim was held, or a batch this count made done, which the caller
# ends in the same transaction. Batch rows are locked in id order before any
# is updated (so two finishes cannot deadlock): the main query reads
# `counted`, while `tallied` and `written`, which nothing reads, run after
# it. A row another transaction holds is skipped, not
# waited for (an open add_to_batch() block): its finishes go to
# steady_queue_batch_endings, counted later (Batch.count_deferred).
COUNT_IN_BATCHES = f""",
locked AS MATERIALIZED (
    SELECT id FROM steady_queue_batches
    WHERE id IN (SELECT batch_id FROM outcome)
    ORDER BY id FOR UPDATE SKIP LOCKED
),
ended AS MATERIALIZED (
    SELECT o.batch_id, count(*) AS n FROM released JOIN outcome o USING (job_id)
    WHERE o.batch_id IS NOT NULL GROUP BY o.batch_id
),
counted AS (
    UPDATE steady_queue_batches batch SET finished = batch.finished + ended.n
    FROM locked, ended
    WHERE batch.id = locked.id AND batch.id = ended.batch_id
        AND batch.ended_at IS NULL
    RETURNING batch.id, {BATCH_DONE_SQL} AS done
),
deferred AS (
    INSERT INTO steady_queue_batch_endings
        (batch_id, finished, failed, discarded, created_at)
    SELECT batch_id, n, 0, 0, now() FROM ended
    WHERE batch_id NOT IN (SELECT id FROM locked)
)
SELECT job_id, NULL FROM released
UNION ALL SELECT NULL, id FROM counted WHERE done
UNION ALL SELECT refused, NULL FROM ({REFUSE_GAINED_DEPENDENTS}) AS guard(refused)
"""

# {(preserve_finished_jobs, in_batches): statement}
FINALIZE_SUCCEEDED_SQL = {
    (preserve, in_batches): FINALIZE_SQL.format(
        write=write,
        columns=", ".join(f"{name} {kind}" for name, kind in RECORD_COLUMNS),
        count_in_batches=(
            COUNT_IN_BATCHES
            if in_batches
            else "\nSELECT job_id FROM released UNION ALL" + REFUSE_GAINED_DEPENDENTS
        ),
    )
    for preserve, write in [(True, KEEP_FINISHED_JOBS), (False, DROP_FINISHED_JOBS)]
    for in_batches in (False, True)
}


def finish_document(outcomes):
    """The JSON document FINALIZE_SUCCEEDED_SQL reads: a record per outcome
    (RECORD_COLUMNS), its outcome already applied to its job."""
    records = []
    for outcome in outcomes:
        job = outcome.job
        queue, task, bucket, seconds = tally_fields(outcome)
        record = outcome_record(job)
        record.update(
            job_id=job.pk,
            batch_id=job.batch_id,
            t_queue=queue,
            t_task=task,
            t_bucket=bucket,
            t_seconds=seconds,
        )
        records.append(record)
    return json.dumps(records, separators=(",", ":"))


def restore(saved):
    """Put back the jobs' fields as ``saved``, [(job, its __dict__ copied)],
    holds them: a finish that wrote nothing leaves them as they were."""
    for job, state in saved:
        job.__dict__.update(state)


class Finishing:
    """ClaimedExecution verbs that record the outcomes of finished runs."""

    def finalize_all(self, outcomes, process_id, preserve_finished_jobs=True):
        """Record outcomes for the jobs this process still holds; return those.

        A claim that is gone (the process was pruned and its jobs failed or
        released meanwhile) keeps whatever happened to it: each job is finalized
        exactly once, by whoever deletes its claim row.
        """
        if not outcomes:
            return []
        # Recording writes each outcome onto its job instance (apply_to); a
        # write that fails must leave them as they were for the next attempt.
        saved = [(outcome.job, dict(outcome.job.__dict__)) for outcome in outcomes]
        try:
            return self._finalize_all(
                outcomes, process_id, preserve_finished_jobs, saved
            )
        except BaseException:
            restore(saved)
            raise

    def _finalize_all(self, outcomes, process_id, preserve_finished_jobs, saved):
        by_id = {outcome.job.pk: outcome for outcome in outcomes}
        # Failures may be retried, limited jobs release slots and jobs with
        # dependents release those: all need more than the one-statement path
        # does, and all are the rarer case. A job keeping durable steps loses
        # them with its row (delete_rows).
        simple = all(
            outcome.succeeded
            and not outcome.job.concurrency_key
            and not outcome.job.has_dependents
            and not (outcome.uses_steps and not preserve_finished_jobs)
            for outcome in outcomes
        )
        if self.dialect.runs_hot_paths_in_one_statement and simple:
            held_ids = self._finalize_in_one_statement_or_not(
                outcomes, process_id, preserve_finished_jobs, saved
            )
            if held_ids is not None:
                if len(held_ids) < len(by_id):
                    # Rare: runs whose claims were taken from them (a cancel,
                    # a timeout) ended; whatever they still held is free.
                    with atomic(using=self.db):
                        self._stop_cancelled_runs(process_id, by_id, held_ids)
                return [by_id[job_id] for job_id in sorted(held_ids)]
        with atomic(using=self.db):
            held_ids = self._delete_held(process_id, sorted(by_id))
            recorded = [by_id[job_id] for job_id in held_ids]
            recorded = self._record(recorded, preserve_finished_jobs)
            # In the same transaction: a slot is given back exactly when its
            # run's outcome is recorded, and its next blocked job made ready.
            self.release_concurrency_slots([outcome.job for outcome in recorded])
            self._stop_cancelled_runs(process_id, by_id, held_ids)
        return recorded

    def _stop_cancelled_runs(self, process_id, by_id, held_ids):
        """Give back the slots and keys of cancelled runs that have now
        ended here."""
        # A job whose claim is gone was cancelled, failed past its timeout
        # or failed by a supervisor: its run has just ended, and with it its
        # hold on a slot or a unique key (CancelledRun), if it had one.
        ended = [job_id for job_id in by_id if job_id not in held_ids]
        if ended:
            CancelledRun.objects.using(self.db).ended(process_id, ended).stopped()

    def _delete_held(self, process_id, job_ids):
        """Delete the claims a process still holds among these jobs; their ids.

        Hand-written (the ORM's compiler costs more than the statement here),
        and safe as delete_returning() is: of two transactions deleting one
        claim, only the first gets its id back.
        """
        quote = self.connection.ops.quote_name
        table = quote(self.model._meta.db_table)
        job_id = quote("job_id")
        pick_sql = (
            f"SELECT {job_id} FROM {table} WHERE {quote('process_id')} + 0 = %s "
            f"AND {job_id} IN ({', '.join(['%s'] * len(job_ids))})"
            f"{self.dialect.lock_clause(self.connection)}"
        )
        with self.connection.cursor() as cursor:
            held = self.dialect.delete_picked(
                cursor, table, job_id, pick_sql, [process_id, *job_ids]
            )
        return sorted(held)

    def release_concurrency_slots(self, jobs):
        """Give back the slots these finished jobs held; unblock the next jobs."""
        self.release_keys([key for job in jobs for key in job.concurrency_keys])

    def release_keys(self, keys):
        """Give back one slot per occurrence of a concurrency key; unblock the
        next jobs of those keys."""
        if keys:
            Semaphore.objects.using(self.db).release_slots(keys)
            models_package.BlockedExecution.objects.using(self.db).release_next(keys)

    def _finalize_in_one_statement_or_not(
        self, outcomes, process_id, preserve_finished_jobs, saved
    ):
        """_finalize_in_one_statement; or None, having written nothing, if a
        job gained a dependent while it ran (its row says has_dependents, the
        row its worker read did not): the caller then takes the ORM path,
        which settles the dependents in its transaction, on the jobs as
        ``saved`` (finalize_all) holds them."""
        try:
            # Inside a caller's transaction, a savepoint: the refusal must
            # not end it. Outside, the statement is its own transaction.
            if self.connection.in_atomic_block:
                block = atomic(using=self.db)
            else:
                block = nullcontext()
            with block:
                return self._finalize_in_one_statement(
                    outcomes, process_id, preserve_finished_jobs
                )
        except DataError as error:
            if GAINED_DEPENDENTS not in str(error):
                raise
        # Which ones gained dependents the ORM path reads again, as it
        # records them (save_outcomes).
        restore(saved)
        return None

    def _finalize_in_one_statement(self, outcomes, process_id, preserve_finished_jobs):
        """Record these successes in one statement; return the held jobs' ids."""
        jobs = [outcome.apply_to(outcome.job) for outcome in outcomes]
        # The claims by key (their ids apart from the document): see
        # claimed_execution/model.py on "process_id + 0".
        params = [
            finish_document(outcomes),
            bigint_array(job.pk for job in jobs),
            process_id,
        ]
        if not any(job.batch_id for job in jobs):
            sql = FINALIZE_SUCCEEDED_SQL[preserve_finished_jobs, False]
            return [row[0] for row in self.run_prepared(sql, params)]
        sql = FINALIZE_SUCCEEDED_SQL[preserve_finished_jobs, True]
        # A transaction: the batch a count made done is ended (stamped, its
        # callbacks enqueued) in the one that counted it, or not at all.
        with atomic(using=self.db):
            rows = self.run_prepared(sql, params)
            done = [batch_id for job_id, batch_id in rows if batch_id is not None]
            if done:
                Batch.objects.using(self.db).end_those_done(done)
        return [job_id for job_id, _ in rows if job_id is not None]

    def _record(self, outcomes, preserve_finished_jobs=True):
        """Write outcomes; return them, failures marked with their retry time."""
        # Runs inside the caller's transaction, after the claim rows were deleted.
        outcomes = [with_retry_decided(outcome) for outcome in outcomes]
        # A parked run's wait is recorded (or its event found emitted) in the
        # transaction that deletes its claim: an emit either sees the wait,
        # or the wait sees the emitted event (models/wait.py).
        outcomes = models_package.Wait.objects.using(self.db).park_all(
            outcomes, timezone.now()
        )
        # A job with dependents is kept: they may read its return value.
        deleted = {
            o.job.pk
            for o in outcomes
            if o.succeeded and not preserve_finished_jobs and not o.job.has_dependents
        }
        kept = [o for o in outcomes if o.job.pk not in deleted]
        jobs = models_package.Job.objects.using(self.db)
        succeeded = [o.apply_to(o.job) for o in kept if o.succeeded]
        if succeeded:
            jobs.save_outcomes(succeeded)
        failures = [o.apply_to(o.job) for o in kept if not o.succeeded]
        if failures:
            # A failure leaves the return value alone (it may not be loaded).
            jobs.save_outcomes(failures, without=["return_value"])
        if deleted:
            # A running job has no execution row but the claim just deleted.
            # Only a job whose run used steps has any (Outcome.uses_steps).
            steps_used = any(o.uses_steps for o in outcomes if o.job.pk in deleted)
            # One that gained dependents while it ran is kept after all.
            jobs.filter(pk__in=deleted, has_dependents=False).delete_rows(
                without_steps=not steps_used
            )
            kept_after_all = set(
                jobs.filter(pk__in=deleted).values_list("pk", flat=True)
            )
            if kept_after_all:
                gained = [
                    o.apply_to(o.job) for o in outcomes if o.job.pk in kept_after_all
                ]
                jobs.save_outcomes(gained)
        failed = [o.job for o in outcomes if not o.succeeded and not o.retry_at]
        if failed:
            models_package.FailedExecution.objects.using(self.db).create_all_for(failed)
        retried = [(o.job, o.retry_at) for o in outcomes if o.retry_at]
        if retried:
            models_package.ScheduledExecution.objects.using(self.db).create_all_at(
                retried, timezone.now()
            )
        # Batch rows are locked before the caller releases concurrency slots
        # (models/batch.py).
        Batch.objects.using(self.db).count_ended(
            finished=[o.job for o in outcomes if o.succeeded], failed=failed
        )
        # In this transaction: a dependent is released (or ended) exactly
        # when its last dependency's end is recorded.
        JobDependency.objects.using(self.db).settle(
            [(o.job, ending_of(o.job, True)) for o in outcomes if o.succeeded]
            + [(job, ending_of(job, False)) for job in failed]
        )
        # Inserted, never updated: no row every finish waits for (JobTally).
        JobTallyDelta.objects.using(self.db).add_outcomes(outcomes)
        return outcomes


def with_retry_decided(outcome):
    """The outcome, with retry_at set if its job's retry policy runs it again."""
    if outcome.succeeded or outcome.snoozed:
        return outcome
    if outcome.exception_class in (JobCancelledError, ResultNotStorableError):
        # Final whatever the retry policy: an operator's cancellation, and a
        # return value that cannot be stored (the task ran; a retry would run
        # it again).
        return outcome
    # Every earlier attempt failed (a success ends the job), leaving an error.
    attempt = outcome.job.error_count + 1
    options = options_of_backend(outcome.job.backend_name)
    # None: the job's backend alias was removed from TASKS; no retries then.
    policy = policy_for(outcome.task, options.retry if options else None)
    wait = policy.wait_before(attempt, outcome.exception_class)
    if wait is None:
        return outcome
    return replace(outcome, retry_at=outcome.finished_at + timedelta(seconds=wait))

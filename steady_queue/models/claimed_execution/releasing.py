"""Claims ended from outside their run: put back to ready, or failed, or
cancelled, by a supervisor, a dispatcher or an operator.
"""

import logging
from datetime import timedelta

from django.db import DatabaseError
from django.db.models import Q
from django.utils import timezone

# The models that import this module, read through their package when called.
from ... import models as models_package
from ...dialects import refuses_the_row
from ...dialects.isolation import atomic
from ...exceptions import cancellation_payload
from ...pipeline.loader import tasks_by_path
from ...pipeline.outcome import Outcome
from ..batch import Batch
from ..cancelled_run import CancelledRun
from ..job_dependency import FAILED
from ..process import Process

logger = logging.getLogger("steady_queue")


class Releasing:
    """ClaimedExecution verbs that end claims without their run's outcome."""

    def release_all(self, worker_ids_by_process=None):
        """Put these claimed jobs back to ready; return their ids.

        ``worker_ids_by_process`` names the workers that had started their
        jobs ({process id: worker name}): each such run counts as an attempt
        (worker_ids, started_at), so a job run again after an interrupted
        attempt knows it ran before. Claims of other processes, and claims
        never started (mark_started), count nothing. A job under @limits_rate
        passes its rate limits again (it may wait, blocked, for room in its
        windows).
        """
        worker_ids_by_process = worker_ids_by_process or {}
        with atomic(using=self.db):
            # Only the columns needed: one row's unreadable arguments must not
            # stop the others from going back to ready.
            claims, jobs = self._take_claims(
                lambda jobs: jobs.only(
                    "pk",
                    "queue_name",
                    "priority",
                    "backend_name",
                    "fair_key",
                    "worker_ids",
                    "runs_dropped",
                    "started_at",
                    "task_path",
                    "concurrency_key",
                    "limit_keys",
                )
            )
            started = []
            for job in jobs:
                process_id, claimed_at, run_began = claims[job.pk]
                worker_id = worker_ids_by_process.get(process_id)
                if worker_id is not None and run_began:
                    job.count_run_by(worker_id)
                    job.started_at = job.started_at or claimed_at
                    job.last_attempted_at = claimed_at
                    started.append(job)
            if started:
                self._count_interrupted_attempts(started)
            # A rate-limited job's next run is a start of its own: it takes
            # room in its windows again (its concurrency slots it keeps).
            rated = [job for job in jobs if job.rate_keys]
            if rated:
                models_package.Job.objects.using(self.db).dispatch_all(
                    rated, holding_concurrency=True
                )
            models_package.ReadyExecution.objects.using(self.db).create_all_for(
                [job for job in jobs if not job.rate_keys]
            )
        return list(claims)

    def hand_back(self, records, version=None, delay=0.0):
        """Put these claimed jobs back, counting no attempt, keeping each
        one's ``handbacks`` from ``records`` ({job id: (handbacks, run at)});
        return their ids. One transaction for them all.

        For a worker of ``version`` that could not load their task (a
        rolling deploy: processes/handback.py). A job with a run-at time is
        scheduled for it. One without is for a worker of another version:
        made ready at once, marked as handed back by ``version`` (whose
        workers leave it), unless it is limited: then scheduled ``delay``
        seconds on. Their concurrency slots are given back, as for a retry;
        they pass their limits again when dispatched. Only claims still held
        go back.
        """
        now = timezone.now()
        with atomic(using=self.db):
            claims, jobs = self._take_claims(
                lambda jobs: jobs.only(
                    "pk",
                    "queue_name",
                    "priority",
                    "backend_name",
                    "fair_key",
                    "concurrency_key",
                    "limit_keys",
                )
            )
            for job in jobs:
                job.handbacks = records[job.pk][0]
            models_package.Job.objects.using(self.db).bulk_update(jobs, ["handbacks"])
            steered = [
                job
                for job in jobs
                if records[job.pk][1] is None
                and not job.concurrency_key
                and not job.limit_keys
            ]
            steered_ids = {job.pk for job in steered}
            later = now + timedelta(seconds=delay)
            models_package.ScheduledExecution.objects.using(self.db).create_all_at(
                [
                    (job, records[job.pk][1] or later)
                    for job in jobs
                    if job.pk not in steered_ids
                ],
                now,
            )
            if steered:
                ready = models_package.ReadyExecution.objects.using(self.db)
                ready.create_all_handed_back(steered, version, now)
            self.release_concurrency_slots(jobs)
        return list(claims)

    def _take_claims(self, columns):
        """Delete these claims; return them and their jobs.

        The claims are {job id: (process id, claimed at, started)}; the jobs are loaded
        with ``columns(queryset)`` choosing what to read. Waits for locks
        (delete_returning): of two callers, only the first gets a claim back,
        and with it the say over its job's outcome.
        """
        rows = self.delete_returning(["job", "process_id", "created_at", "started"])
        claims = {
            job_id: (process_id, at, began) for job_id, process_id, at, began in rows
        }
        jobs = models_package.Job.objects.using(self.db).filter(pk__in=claims)
        return claims, list(columns(jobs))

    def _count_interrupted_attempts(self, jobs):
        fields = ["worker_ids", "runs_dropped", "started_at", "last_attempted_at"]
        try:
            # A savepoint: a row the database refuses to update must not keep
            # the jobs from going back to ready; they lose only the count.
            with atomic(using=self.db):
                models_package.Job.objects.using(self.db).bulk_update(jobs, fields)
        except DatabaseError:
            logger.exception("Could not count the interrupted attempts of %s", jobs)

    def fail_all_with(self, error, worker_ids_by_process=None, runs_go_on=False):
        """Fail these claimed jobs with one error (their process is gone).

        A claim whose process left no name counts its attempt under the
        process id, so attempts still count every start. With ``runs_go_on``
        (a cancel, or a timeout whose thread is abandoned: their processes
        still run them) their concurrency slots, and the unique keys they
        hold until finished, stay taken until the runs have stopped
        (CancelledRun).
        """
        now = timezone.now()
        worker_ids_by_process = worker_ids_by_process or {}
        with atomic(using=self.db):
            # The arguments and the return value are neither read nor written.
            claims, jobs = self._take_claims(
                lambda jobs: jobs.defer("arguments", "return_value")
            )
            # Their retry policies are read off their tasks, each loaded once.
            tasks = tasks_by_path({job.task_path for job in jobs})
            outcomes = [
                Outcome(
                    job=job,
                    claimed_at=claims[job.pk][1],
                    task=tasks[job.task_path],
                    worker_id=worker_ids_by_process.get(
                        claims[job.pk][0], f"process-{claims[job.pk][0]}"
                    ),
                    finished_at=now,
                    succeeded=False,
                    error=error,
                )
                for job in jobs
            ]
            outcomes = self._record(outcomes)
            failed = [outcome.job for outcome in outcomes]
            if runs_go_on:
                CancelledRun.objects.using(self.db).hold_slots_of(
                    {job: claims[job.pk][0] for job in failed}
                )
            else:
                self.release_concurrency_slots(failed)
        return failed

    def cancel_all(self, by):
        """Cancel these running jobs: fail them with JobCancelledError; their ids.

        The claim goes in the same transaction as the job is failed, so the
        worker still running it can never record an outcome over this one
        (finalize_all records only claims still held), and learns of it by
        seeing the claim gone (Worker.stop_lost_jobs). A limited job keeps
        its concurrency slot until that run has stopped (CancelledRun). A job
        that finished meanwhile has no claim left and is not touched. Never
        retried.

        Locking: the claims are deleted with their rows locked, and whoever
        deletes one (this cancel, a finish, a supervisor) alone records its
        run's end; the CancelledRun of a run is written in the same
        transaction, so one run holds one slot, given back once. A job
        retried after a cancel and cancelled again while its first run goes
        on holds a slot for each run, one row each, each given back when its
        own run stops.
        """
        error = cancellation_payload(by, timezone.now())
        process_ids = set(self.values_list("process_id", flat=True))
        # The attempt counts under the name of the worker that ran it.
        names = dict(
            Process.objects.using(self.db)
            .filter(pk__in=process_ids)
            .values_list("pk", "name")
        )
        failed = self.fail_all_with(error, names, runs_go_on=True)
        return [job.pk for job in failed]

    def resolve_with(self, error, worker_ids_by_process=None, never_started=()):
        """End the claims of processes that are gone: those whose runs never
        started go back to ready, counting no attempt; the started ones are
        failed with ``error``, job by job (fail_each_with). Returns the failed
        jobs.

        What a run did is known only once it started: a claim taken and not
        started (a worker's claims ahead, or one killed before its threads
        began them) is safe to run again, a started one may have done its
        work. The database says which (mark_started), so every cleaner, the
        process's supervisor, another host's prune or a restart, sees it. A
        worker marks a few claims ahead of their start; its supervisor knows
        those exactly (``never_started``, read from memory it shares with
        the worker) and puts them back too.
        """
        # Not-started first. Each claim goes to whoever deletes it: a run the
        # process starts meanwhile (mark_started committed first) is no
        # longer matched here and is failed with the others below.
        released = self.filter(
            Q(started=False) | Q(job_id__in=never_started)
        ).release_all()
        if released:
            logger.info(
                "%s claim(s) of gone processes never started; back to ready: %s",
                len(released),
                ", ".join(str(job_id) for job_id in sorted(released)),
            )
        return self.fail_each_with(error, worker_ids_by_process)

    def fail_each_with(self, error, worker_ids_by_process=None):
        """Fail these claims like fail_all_with, one job per transaction.

        For sweeps over claims of many dead processes: a row that cannot be
        failed is logged and skipped, and does not block the cleanup of the
        others. Returns the failed jobs.
        """
        failed = []
        for job_id in list(self.values_list("job_id", flat=True)):
            claim = self.filter(job_id=job_id)
            try:
                failed += claim.fail_all_with(error, worker_ids_by_process)
            except DatabaseError as refused:
                # A lock conflict or an outage is not this row's fault: let the
                # caller's guard retry the sweep rather than give up the row.
                if not refuses_the_row(refused, self.connection):
                    raise
                logger.exception(
                    "Could not record the failure of job %s in its row; failing it "
                    "without writing the row",
                    job_id,
                )
                failed += claim.fail_without_writing_the_jobs()
        return failed

    def fail_without_writing_the_jobs(self):
        """Mark these claimed jobs failed, leaving their job rows untouched.

        The last resort for a row the database refuses to update (on MariaDB a
        row failing a CHECK constraint cannot be updated at all): the claim
        goes, a failed execution marks the job FAILED, and its slot is freed.
        The error is in the log, not on the row. Returns the jobs.
        """
        with atomic(using=self.db):
            ids = [row[0] for row in self.delete_returning(["job"])]
            # Locked: has_dependents is read as its latest commit says.
            jobs = list(
                models_package.Job.objects.using(self.db)
                .filter(pk__in=ids)
                .select_for_update()
                .only(
                    "pk",
                    "concurrency_key",
                    "limit_keys",
                    "backend_name",
                    "task_path",
                    "batch_id",
                    "has_dependents",
                )
            )
            models_package.FailedExecution.objects.using(self.db).create_all_for(jobs)
            Batch.objects.using(self.db).count_ended(failed=jobs)
            dependencies = models_package.JobDependency.objects.using(self.db)
            dependencies.settle([(job, FAILED) for job in jobs])
            self.release_concurrency_slots(jobs)
        return jobs

    def fail_overrun(self, process_id, errors, worker_id, runs_go_on=False):
        """Fail a process's overrunning jobs, each with its own error; return
        their ids. The process's other claims are left as they are. With
        ``runs_go_on`` (the worker fails them itself and abandons their
        threads, which run on until it exits) they keep their concurrency
        slots and the unique keys they hold until finished, as a cancelled
        run does (CancelledRun): the next run of a key must not start beside
        them."""
        with atomic(using=self.db):
            held = self.held_by(process_id)
            failed = []
            for job_id, error in errors.items():
                jobs = held.filter(job_id=job_id).fail_all_with(
                    error,
                    worker_ids_by_process={process_id: worker_id},
                    runs_go_on=runs_go_on,
                )
                failed.extend(job.pk for job in jobs)
        return failed

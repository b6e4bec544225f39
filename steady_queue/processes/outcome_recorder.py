"""OutcomeRecorder: a worker's finished runs, written together once per poll."""

import collections
import logging
import time
from dataclasses import replace

from django.db import connections

from ..dialects import refuses_the_row
from ..exceptions import OutcomeNotStoredError, error_payload
from ..models import ClaimedExecution

logger = logging.getLogger("steady_queue")

# How long a finished run's outcome may wait for others to be written with it,
# while the worker still runs other jobs: one transaction per window instead
# of one per job (and the claim that follows it fills every freed thread).
FLUSH_WINDOW = 0.005


class OutcomeRecorder:
    """Collects the outcomes pool threads produce; the main loop writes them.

    Pool threads call add(); only the worker's main loop calls record(). An
    outcome stays pending until it is written (or failed in its place): an
    outage loses none, the next poll writes them.
    """

    def __init__(self, database, preserve_finished_jobs, description):
        self.database = database
        self.preserve_finished_jobs = preserve_finished_jobs
        self.description = description
        # Filled by pool threads, drained by the main loop; deque ops are atomic.
        self.arrived = collections.deque()
        self.pending = []
        # When the oldest pending outcome was collected (main loop's clock).
        self.pending_since = None

    def add(self, outcome):
        """Called from pool threads: keep the outcome for the next record()."""
        self.arrived.append(outcome)

    def pending_job_ids(self):
        """The jobs whose outcome arrived and is not written yet."""
        self.collect()
        return {outcome.job.pk for outcome in self.pending}

    def collect(self):
        """Move the outcomes threads added to the pending ones (main loop)."""
        if self.arrived and not self.pending:
            self.pending_since = time.monotonic()
        while self.arrived:
            self.pending.append(self.arrived.popleft())

    def due_in(self, running):
        """Seconds until the pending outcomes are to be written: 0 for now,
        None when there are none. ``running`` is how many of the worker's
        jobs are still running: with none, nothing more is coming to wait for.
        """
        self.collect()
        if not self.pending:
            return None
        if running <= 0:
            return 0.0
        return max(0.0, self.pending_since + FLUSH_WINDOW - time.monotonic())

    def record(self, process_id):
        """Write every pending outcome in one transaction.

        Returns (recorded, done, outage): recorded are the outcomes written
        for claims this process still held (finalize_all skips claims already
        resolved elsewhere), done every outcome dealt with, and outage the
        error that stopped the rest, which stay pending: the caller raises it
        once it has dealt with the others.
        """
        self.collect()
        if not self.pending:
            return [], [], None
        claims = ClaimedExecution.objects.using(self.database)
        try:
            recorded = claims.finalize_all(
                self.pending, process_id, self.preserve_finished_jobs
            )
        except Exception as error:
            if not refuses_the_row(error, connections[self.database]):
                # An outage or a lock conflict: everything waits for the next
                # poll, after the guard has given us a fresh connection.
                raise
            # One outcome the database refuses must not hold back the others
            # (nor, at shutdown, send finished jobs back to run again).
            return self.record_one_at_a_time(claims, process_id)
        done, self.pending = self.pending, []
        return recorded, done, None

    def record_one_at_a_time(self, claims, process_id):
        """Record each unrecorded outcome alone; fail those the database refuses.

        Returns (recorded, done, outage) as record() does: outage is the error
        that stopped the rest (the database itself is failing, not one row).
        """
        recorded, done, outage = [], [], None
        for outcome in self.pending:
            try:
                recorded += self._finalize(claims, outcome, process_id)
            except Exception as refused:
                connection = connections[self.database]
                if not refuses_the_row(refused, connection):
                    # A lock conflict or an outage: the outcome itself may be
                    # fine, so it waits for the next poll, unchanged.
                    outage = refused
                    break
                try:
                    substitute = outcome_not_stored(outcome, refused)
                    recorded += self._finalize(claims, substitute, process_id)
                except Exception as error:
                    if not refuses_the_row(error, connection):
                        outage = error
                        break
                    # The database works but will not update this job's row.
                    claims.held_by(process_id).filter(
                        job_id=outcome.job.pk
                    ).fail_without_writing_the_jobs()
                logger.error(
                    "%s: the database refused the outcome of job %s (%s); the job "
                    "was failed instead",
                    self.description,
                    outcome.job.pk,
                    first_line(refused),
                )
            done.append(outcome)
        self.pending = self.pending[len(done) :]
        return recorded, done, outage

    def _finalize(self, claims, outcome, process_id):
        return claims.finalize_all([outcome], process_id, self.preserve_finished_jobs)


def outcome_not_stored(outcome, refused):
    """A failed outcome standing in for one the database refused to store."""
    produced = (
        "it succeeded"
        if outcome.succeeded
        else "it snoozed"
        if outcome.snoozed
        else f"it failed with {outcome.error['exception_class_path']}"
    )
    return replace(
        outcome,
        succeeded=False,
        snoozed=False,
        parked=None,
        return_value=None,
        exception=None,
        retry_at=None,
        error=error_payload(
            OutcomeNotStoredError,
            f"The run ended ({produced}), but the database refused to store its "
            f"outcome: {type(refused).__name__}: {first_line(refused)}",
        ),
    )


def first_line(error):
    return (str(error).strip().splitlines() or [""])[0][:500]

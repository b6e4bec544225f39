"""JobStopping: how a worker stops the jobs it must not let run on.

A job past its timeout is failed and its thread abandoned (the worker then
drains and exits to be replaced); a job whose claim was taken away (an
operator cancelled it, or a supervisor failed it) is stopped here: a
coroutine cancelled, a thread left to end with the process.
"""

import collections
import logging
import time

from ..decorators.timeouts import overrun_error
from ..dialects.isolation import atomic
from ..models import ClaimedExecution

logger = logging.getLogger("steady_queue")

# How often a busy worker checks that it still holds the claims of the jobs it
# runs: a claim taken away (an operator cancelled the job, or a supervisor
# failed it) means the job must stop here, and its outcome must not be written.
CLAIM_CHECK_INTERVAL = 1.0


class JobStopping:
    """The Worker's verbs for jobs past their timeout or no longer its own."""

    def stop_overrunning_jobs(self):
        """Fail the jobs past their timeout; then drain and exit to be replaced.

        A thread cannot be interrupted: the overrunning job is failed at once
        and its thread abandoned (a result it returns later is dropped, its
        claim being gone). The worker's other jobs are not handed back: a job
        whose function returns just after a hand-back would run twice. They
        finish (each under its own timeout) and are recorded, as when
        recycling; then the worker exits, which in fork mode ends the stuck
        thread with the process. Should the worker not get that far (a task
        holding the GIL), its supervisor kills it from outside.
        """
        overdue = self.deadlines.overdue()
        errors = {
            job_id: overrun_error(
                deadline.task_path,
                deadline.seconds,
                self.deadlines.stack_of(job_id),
                stopped=self.owns_process,
            )
            for job_id, deadline in overdue.items()
        }
        # Its thread runs on until this worker exits: its slots and unique
        # key stay taken until then (CancelledRun), given back as it ends.
        ClaimedExecution.objects.using(self.database).fail_overrun(
            self.process.pk, errors, self.name, runs_go_on=True
        )
        described = ", ".join(
            f"job {job_id} ({d.task_path}, {d.seconds:g} s)"
            for job_id, d in overdue.items()
        )
        logger.warning(
            "%s: %s ran past its timeout and was failed; its thread cannot be "
            "stopped and is abandoned; draining to be replaced",
            self.description,
            described,
        )
        for job_id in overdue:
            self.forget(job_id)
        self.recycler.recycle(f"a job ran past its timeout ({described})")

    def stop_lost_jobs(self):
        """Stop running the jobs whose claims this process no longer holds.

        An operator cancelled them (ClaimedExecutionQuerySet.cancel_all), or a
        supervisor that took this process for dead failed them: their outcome
        is already written, and whatever they produce now is dropped (finalize
        records only claims still held). A coroutine is cancelled; a thread
        cannot be, so a forked worker drains to be replaced, giving its other
        running jobs shutdown_timeout to finish (those still running then are
        handed back), and in thread mode the thread runs on, ignored. A
        limited job's slot stays taken until its run has stopped: the
        coroutine cancelled, the thread returned, or the process ended.
        """
        self.next_claim_check = time.monotonic() + CLAIM_CHECK_INTERVAL
        # An outcome waiting to be recorded (an outage) is no longer running.
        running = self.in_flight - self.recorder.pending_job_ids()
        if not running:
            return
        lost = sorted(running - self.process.still_holds(running))
        waiting = {claim.job.pk for claim in self.waiting}
        threads, stopped = [], []
        for job_id in lost:
            future = self.coroutines.get(job_id)
            if job_id in waiting:
                # Claimed ahead and never started: dropped, nothing to stop.
                stopped.append(job_id)
            elif future is not None:
                future.cancel()
                stopped.append(job_id)
            else:
                threads.append(job_id)
            self.forget(job_id)
        if waiting.intersection(lost):
            self.waiting = collections.deque(
                claim for claim in self.waiting if claim.job.pk not in lost
            )
        if stopped:
            # Cancelled on the loop, or never started: a limited one's slot is
            # free again. Should this fail, the slot is given back when this
            # process deregisters.
            self.stop_cancelled_runs(stopped)
        if lost:
            how = (
                "it was stopped (its coroutine cancelled, or it had not started)"
                if not threads
                else "draining to be replaced, as a thread cannot be stopped; "
                "its other running jobs get shutdown_timeout to finish"
                if self.owns_process
                else "a thread cannot be stopped in thread mode: it runs on, "
                "holding its concurrency slot, and its result will be ignored"
            )
            logger.warning(
                "%s: job(s) %s no longer held by this worker (cancelled, or failed "
                "by its supervisor); %s",
                self.description,
                ", ".join(str(job_id) for job_id in lost),
                how,
            )
        if threads and self.owns_process:
            # Draining, as when recycling, but for shutdown_timeout at most:
            # the cancelled run goes on until the process ends, holding its
            # concurrency slot (CancelledRun). Polling on, so the other jobs'
            # timeouts still hold; not handed back at once, as a job whose
            # function returns just after being handed back would run twice.
            listed = ", ".join(str(job_id) for job_id in threads)
            self.recycler.recycle(f"job(s) {listed} cancelled while running")
            self.drain_until = time.monotonic() + self.options.shutdown_timeout

    def stop_cancelled_runs(self, job_ids):
        """These cancelled runs have stopped here: give back their slots."""
        with atomic(using=self.database):
            self.process.cancelled_runs_ended(job_ids).stopped()

"""Worker: claims ready jobs for its idle threads and records what they produce.

It is also the sentinel for its own jobs: a sync job past its timeout cannot be
interrupted, so the worker fails it and exits to be replaced; and it recycles
itself (max_tasks, max_memory_mb) by draining and exiting the same way.
"""

import collections
import logging
import threading
import time
from inspect import iscoroutinefunction

from ..exceptions import TaskNotFoundError
from ..queue_selector import QueueSelector
from ..runner import JobRunner
from ..task_loader import load_task
from ..timeouts import overrun_error, timeout_for
from .listener import ReadyListener
from .poller import Poller
from .pool import Pool
from .recycling import Recycler
from .sentinel import Deadlines

logger = logging.getLogger("steady_queue")

# A full pool sleeps until a thread frees up; this only bounds a missed wake-up.
FULL_POOL_WAIT = 10.0
# An async job is cancelled on the loop at its timeout; only if the loop is
# blocked (sync code in a coroutine) does the sentinel step in, this much later.
ASYNC_GRACE = 2.0
# A forked worker exits with this to be replaced at once: it was recycled or
# stopped an overrunning job, and holds no claims. Not a crash: no backoff.
REPLACE_EXIT_CODE = 75


class Worker(Poller):
    """Claims up to its idle capacity per poll and group-commits the outcomes."""

    kind = "worker"

    def __init__(self, backend, config, **kwargs):
        self.config = config
        super().__init__(backend, **kwargs)
        self.polling_interval = config.polling_interval
        self.selector = QueueSelector(config.queues, self.database)
        self.pool = Pool(
            config.threads,
            on_done=self.completed,
            name=self.name,
            on_free=self.wake_up,
        )
        self.runner = JobRunner(type(backend), worker_id=self.name)
        # Filled by pool threads, drained by the main loop; deque ops are atomic.
        self.outcomes = collections.deque()
        self.unrecorded = []
        # Jobs claimed and not yet recorded. Main loop only, like every claim.
        self.in_flight = set()
        # Set when a claim failed: it may have committed although its reply never
        # arrived, leaving jobs claimed that this process does not run.
        self.claims_uncertain = False
        self.listener = None
        # Forked: the worker owns its process and can exit to kill a stuck
        # thread. In thread mode it shares the supervisor's process.
        self.owns_process = self.supervisor_pid is not None
        self.deadlines = Deadlines()
        self.recycler = Recycler(config, measure_memory=self.owns_process)
        # Why this worker asked to be replaced; None if it was just stopped.
        self.replacement_reason = None

    def metadata(self):
        limits = {
            key: value
            for key in ("max_tasks", "max_memory_mb")
            if (value := getattr(self.config, key)) is not None
        }
        return {
            "queues": ",".join(self.config.queues),
            "threads": self.config.threads,
            "polling_interval": self.config.polling_interval,
            **limits,
        }

    def boot(self):
        self.pool.start()
        super().boot()
        if self.options.listen_notify and ReadyListener.is_supported(self.database):
            # A NOTIFY for a new ready job ends the poll sleep at once.
            self.listener = ReadyListener(self.database, self.wake_up, self.name)
            self.listener.start()

    def poll(self):
        if self.claims_uncertain:
            self.release_unknown_claims()
        self.record_outcomes()
        if self.deadlines.overdue():
            self.stop_overrunning_jobs()
            return 0
        if self.recycler.reason is not None:
            return self.drain_to_recycle()
        idle = self.pool.idle_threads
        wanted = self.recycler.claim_limit(idle)
        if self.stopping or wanted <= 0:
            return self.deadlines.cap(FULL_POOL_WAIT)
        from ..models import ReadyExecution

        try:
            jobs = ReadyExecution.objects.using(self.database).claim(
                self.selector, wanted, self.process.pk
            )
        except Exception:
            # Some claims may have committed (an earlier queue's transaction, or
            # a COMMIT whose reply was lost) without reaching us: look next time.
            self.claims_uncertain = True
            raise
        self.recycler.count_claimed(len(jobs))
        for job in jobs:
            self.in_flight.add(job.pk)
            self.perform(job)
        delay = 0 if len(jobs) == idle else self.polling_interval
        return self.deadlines.cap(delay)

    def release_unknown_claims(self):
        """Hand back to ready the claims this process holds but is not running."""
        from ..models import ClaimedExecution

        # Safe against our own claims: only this (main) thread claims, and it is
        # here. in_flight still holds every job whose outcome is unrecorded.
        released = (
            ClaimedExecution.objects.using(self.database)
            .held_by(self.process.pk)
            .exclude(job_id__in=self.in_flight)
            .release_all()
        )
        self.claims_uncertain = False
        if released:
            logger.warning(
                "%s: released %s job(s) claimed during a database error: %s",
                self.description,
                len(released),
                ", ".join(str(job_id) for job_id in released),
            )

    def perform(self, job):
        try:
            task = load_task(job.task_path)
        except TaskNotFoundError as error:
            self.completed(self.runner.not_runnable(job, error))
            return
        seconds = timeout_for(task, self.options.timeout)
        if iscoroutinefunction(task.func):
            self.deadlines.watch(job, seconds, grace=ASYNC_GRACE)
            self.pool.post_coroutine(lambda: self.runner.arun(job, task, seconds))
        else:
            self.deadlines.watch(job, seconds)
            self.pool.post(lambda: self._run(job, task))

    def _run(self, job, task):
        """Run a sync job on a pool thread; never leave it without an outcome."""
        self.deadlines.threads[job.pk] = threading.get_ident()
        try:
            return self.runner.run(job, task)
        except BaseException as error:
            # The runner records the task's own errors; reaching here is a bug in
            # the run's bookkeeping, and an outcome-less job would stay claimed
            # until this worker exits.
            logger.exception("%s: running job %s failed", self.description, job.pk)
            return self.runner.not_runnable(job, error)

    def completed(self, outcome):
        """Called from pool threads: queue the outcome and wake the main loop."""
        self.outcomes.append(outcome)
        self.wake_up()

    def record_outcomes(self):
        """Write every finished run in one transaction, then report them."""
        from ..models import ClaimedExecution

        while self.outcomes:
            self.unrecorded.append(self.outcomes.popleft())
        if not self.unrecorded:
            return
        # Only committed outcomes are reported; a failed write keeps them for the
        # next poll, and finalize_all skips claims already resolved elsewhere.
        recorded = ClaimedExecution.objects.using(self.database).finalize_all(
            self.unrecorded, self.process.pk, self.options.preserve_finished_jobs
        )
        for outcome in self.unrecorded:
            self.in_flight.discard(outcome.job.pk)
            self.deadlines.forget(outcome.job.pk)
        self.unrecorded = []
        for outcome in recorded:
            task = self._task_of(outcome)
            if task is not None:
                self.runner.report_finished(outcome, task)
        if recorded:
            self.recycler.check_memory()

    def stop_overrunning_jobs(self):
        """Fail the jobs past their timeout; then exit to be replaced.

        A thread cannot be interrupted, so only ending the process stops an
        overrunning sync job. Forked, the worker fails it and hands its other
        jobs back to ready in one transaction, then exits at once: no claim is
        left for the supervisor to treat as a crash. In thread mode the process
        cannot end: the job is failed and its thread abandoned (its result is
        dropped, the claim being gone), and the worker drains as if recycled.
        """
        from ..models import ClaimedExecution

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
        _, released = ClaimedExecution.objects.using(self.database).fail_overrun(
            self.process.pk, errors, self.name, release_others=self.owns_process
        )
        described = ", ".join(
            f"job {job_id} ({d.task_path}, {d.seconds:g} s)"
            for job_id, d in overdue.items()
        )
        logger.warning(
            "%s: %s ran past its timeout and was failed; %s",
            self.description,
            described,
            f"released {len(released)} other job(s), exiting to be replaced"
            if self.owns_process
            else "its thread cannot be stopped and is abandoned; draining to be "
            "replaced",
        )
        reason = f"a job ran past its timeout ({described})"
        for job_id in overdue:
            self.in_flight.discard(job_id)
            self.deadlines.forget(job_id)
        if self.owns_process:
            # Nothing is held any more: outcomes still to come are dropped by
            # finalize_all, and shutdown must not wait for the stuck thread.
            self.in_flight.clear()
            self.deadlines.clear()
            self.replace(reason)
        else:
            self.recycler.recycle(reason)

    def drain_to_recycle(self):
        """Claim nothing; once every job is recorded, exit to be replaced."""
        if self.in_flight:
            return self.deadlines.cap(FULL_POOL_WAIT)
        logger.info(
            "%s: %s; exiting to be replaced", self.description, self.recycler.reason
        )
        self.replace(self.recycler.reason)
        return 0

    def replace(self, reason):
        """Stop, and tell the supervisor (exit code or attribute) to replace us."""
        self.replacement_reason = reason
        self.stop()

    def _task_of(self, outcome):
        try:
            return load_task(outcome.job.task_path)
        except TaskNotFoundError:
            return None

    def stop_working(self):
        """Let running jobs finish up to shutdown_timeout, then hand the rest back."""
        if self.listener is not None:
            self.listener.stop()
        timeout = 0 if self.immediate else self.options.shutdown_timeout
        deadline = time.monotonic() + timeout
        # in_flight, not the pool: a thread abandoned past its timeout stays busy.
        while self.in_flight and not self.immediate:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            self.guard.call(self.record_outcomes)
            self.interruptible_sleep(min(remaining, 0.05))
        self.guard.call(self.record_outcomes)
        # Claims still held are released back to ready when the row is removed.
        self.pool.stop()

"""Worker: claims ready jobs for its idle threads and records what they produce."""

import collections
import logging
import time
from inspect import iscoroutinefunction

from ..exceptions import TaskNotFoundError
from ..queue_selector import QueueSelector
from ..runner import JobRunner
from ..task_loader import load_task
from .listener import ReadyListener
from .poller import Poller
from .pool import Pool

logger = logging.getLogger("steady_queue")

# A full pool sleeps until a thread frees up; this only bounds a missed wake-up.
FULL_POOL_WAIT = 10.0


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

    def metadata(self):
        return {
            "queues": ",".join(self.config.queues),
            "threads": self.config.threads,
            "polling_interval": self.config.polling_interval,
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
        idle = self.pool.idle_threads
        if self.stopping or idle <= 0:
            return FULL_POOL_WAIT
        from ..models import ReadyExecution

        try:
            jobs = ReadyExecution.objects.using(self.database).claim(
                self.selector, idle, self.process.pk
            )
        except Exception:
            # Some claims may have committed (an earlier queue's transaction, or
            # a COMMIT whose reply was lost) without reaching us: look next time.
            self.claims_uncertain = True
            raise
        for job in jobs:
            self.in_flight.add(job.pk)
            self.perform(job)
        return 0 if len(jobs) == idle else self.polling_interval

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
        if iscoroutinefunction(task.func):
            self.pool.post_coroutine(lambda: self.runner.arun(job, task))
        else:
            self.pool.post(lambda: self._run(job, task))

    def _run(self, job, task):
        """Run a sync job on a pool thread; never leave it without an outcome."""
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
        self.unrecorded = []
        for outcome in recorded:
            task = self._task_of(outcome)
            if task is not None:
                self.runner.report_finished(outcome, task)

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
        while not self.pool.is_idle and not self.immediate:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            self.guard.call(self.record_outcomes)
            self.interruptible_sleep(min(remaining, 0.05))
        self.guard.call(self.record_outcomes)
        # Claims still held are released back to ready when the row is removed.
        self.pool.stop()

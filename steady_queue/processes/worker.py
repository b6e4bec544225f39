"""Worker: claims ready jobs for its idle threads and records what they produce."""

import collections
import time
from inspect import iscoroutinefunction

from ..exceptions import TaskNotFoundError
from ..queue_selector import QueueSelector
from ..runner import JobRunner
from ..task_loader import load_task
from .poller import Poller
from .pool import Pool

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
        self.pool = Pool(config.threads, on_done=self.completed, name=self.name)
        self.runner = JobRunner(type(backend), worker_id=self.name)
        # Filled by pool threads, drained by the main loop; deque ops are atomic.
        self.outcomes = collections.deque()
        self.unrecorded = []

    def metadata(self):
        return {
            "queues": ",".join(self.config.queues),
            "threads": self.config.threads,
            "polling_interval": self.config.polling_interval,
        }

    def boot(self):
        self.pool.start()
        super().boot()

    def poll(self):
        self.record_outcomes()
        idle = self.pool.idle_threads
        if self.stopping or idle <= 0:
            return FULL_POOL_WAIT
        from ..models import ReadyExecution

        jobs = ReadyExecution.objects.using(self.database).claim(
            self.selector, idle, self.process.pk
        )
        for job in jobs:
            self.perform(job)
        return 0 if len(jobs) == idle else self.polling_interval

    def perform(self, job):
        try:
            task = load_task(job.task_path)
        except TaskNotFoundError as error:
            self.completed(self.runner.not_runnable(job, error))
            return
        if iscoroutinefunction(task.func):
            self.pool.post_coroutine(lambda: self.runner.arun(job, task))
        else:
            self.pool.post(lambda: self.runner.run(job, task))

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

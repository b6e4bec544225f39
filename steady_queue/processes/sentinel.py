"""Deadlines: when each running job's time is up, for the worker's sentinel."""

import sys
import time
import traceback
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Deadline:
    """One running job's limit: due at ``at`` (time.monotonic())."""

    at: float
    seconds: float
    task_path: str


class Deadlines:
    """The deadlines of a worker's running jobs; used by its main loop only."""

    def __init__(self):
        self._by_job = {}
        # Job id -> ident of the pool thread running it, written by that thread
        # (one dict store, atomic), read by the main loop for the stack.
        self.threads = {}

    def watch(self, job, seconds, grace=0.0):
        """Start the clock on a job about to run; None means no limit."""
        if seconds is not None:
            self._by_job[job.pk] = Deadline(
                time.monotonic() + seconds + grace, seconds, job.task_path
            )

    def forget(self, job_id):
        self._by_job.pop(job_id, None)
        self.threads.pop(job_id, None)

    def clear(self):
        self._by_job.clear()
        self.threads.clear()

    def overdue(self):
        """Return {job id: Deadline} for the jobs whose time is up."""
        now = time.monotonic()
        return {job_id: d for job_id, d in self._by_job.items() if d.at <= now}

    def cap(self, delay):
        """Shorten a sleep so the loop wakes when the next deadline passes."""
        if not self._by_job:
            return delay
        soonest = min(d.at for d in self._by_job.values())
        return max(0.0, min(delay, soonest - time.monotonic()))

    def stack_of(self, job_id):
        """The formatted stack of the thread running a job, or None."""
        frame = sys._current_frames().get(self.threads.get(job_id))
        return traceback.format_stack(frame) if frame is not None else None

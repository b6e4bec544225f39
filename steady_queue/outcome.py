"""Outcome: what running one claimed job produced, before it is recorded."""

from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """The result of one run: success with a value, or failure with an error."""

    job: Any  # a claimed steady_queue.models.Job
    worker_id: str | None
    finished_at: datetime
    succeeded: bool
    return_value: Any = None
    # {"exception_class_path": ..., "traceback": ...}, the shape of a TaskError.
    error: dict | None = None
    # Kept so the finished signal can log the traceback once the outcome is saved.
    exception: BaseException | None = None
    # Set when a failed run will be attempted again (its task's retry policy).
    retry_at: datetime | None = None

    @property
    def exception_class(self):
        """The class of the error this run failed with, or None."""
        if self.exception is not None:
            return type(self.exception)
        if self.error is None:
            return None
        from .retries import exception_class_of

        return exception_class_of(self.error)

    def apply_to(self, job):
        """Copy this outcome onto the job row's fields (not saved)."""
        # A run that will be retried leaves the job unfinished.
        job.finished_at = None if self.retry_at else self.finished_at
        job.started_at = job.started_at or job.claimed_at
        job.last_attempted_at = job.claimed_at
        if self.worker_id:
            job.worker_ids = [*job.worker_ids, self.worker_id]
        if self.succeeded:
            job.return_value = self.return_value
        else:
            job.errors = [*job.errors, self.error]
        return job

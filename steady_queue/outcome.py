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

    def apply_to(self, job):
        """Copy this outcome onto the job row's fields (not saved)."""
        job.finished_at = self.finished_at
        job.started_at = job.started_at or job.claimed_at
        job.last_attempted_at = job.claimed_at
        if self.worker_id:
            job.worker_ids = [*job.worker_ids, self.worker_id]
        if self.succeeded:
            job.return_value = self.return_value
        else:
            job.errors = [*job.errors, self.error]
        return job

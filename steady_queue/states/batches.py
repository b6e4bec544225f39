"""BatchStatus: what get_batch() returns and what a batch's callbacks receive."""

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

# The keyword each callback is called with, and the events that call one.
ARGUMENT = "batch"
EVENTS = {"on_finish": "finish", "on_success": "success", "on_failure": "failure"}


class BatchState(StrEnum):
    """Where a batch stands."""

    # Its block is still running (seen only inside the block's transaction).
    OPEN = "open"
    # Sealed; some of its jobs have not ended yet.
    RUNNING = "running"
    # Every job ended and finished: on_finish and on_success were enqueued.
    SUCCEEDED = "succeeded"
    # Every job ended, one or more failed or was discarded: on_finish and
    # on_failure were enqueued.
    FAILED = "failed"


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchStatus:
    """A batch as read from its row: its counts, state and callbacks."""

    id: int
    state: BatchState
    size: int
    pending: int
    finished: int
    failed: int
    discarded: int
    metadata: dict[str, Any]
    created_at: datetime
    ended_at: datetime | None
    # {event: task path} for "finish", "success" and "failure".
    callbacks: dict[str, str]
    # {event: result id of the callback's job, or "error: ..." if it could
    # not be enqueued}, once the batch has ended.
    callback_results: dict[str, str]

    @classmethod
    def of(cls, batch):
        """The status of a Batch row."""
        if not batch.sealed:
            state = BatchState.OPEN
        elif batch.ended_at is None:
            state = BatchState.RUNNING
        elif batch.succeeded:
            state = BatchState.SUCCEEDED
        else:
            state = BatchState.FAILED
        return cls(
            id=batch.pk,
            state=state,
            size=batch.size,
            pending=batch.pending,
            finished=batch.finished,
            failed=batch.failed,
            discarded=batch.discarded,
            metadata=batch.metadata,
            created_at=batch.created_at,
            ended_at=batch.ended_at,
            callbacks={
                event: spec["task_path"] for event, spec in batch.callbacks.items()
            },
            callback_results=dict(batch.callback_results),
        )

    @property
    def ended(self):
        return self.ended_at is not None

    @property
    def progress(self):
        """The share of its jobs that have ended, 0.0 to 1.0 (1.0 if empty)."""
        return (self.size - self.pending) / self.size if self.size else 1.0

    def as_argument(self, event):
        """The JSON ``batch`` argument a callback task is called with."""
        return {
            "id": self.id,
            "event": event,
            "state": str(self.state),
            "size": self.size,
            "finished": self.finished,
            "failed": self.failed,
            "discarded": self.discarded,
            "metadata": self.metadata,
        }

"""A job's states, and the django.tasks status each stands for.

A job is in at most one of the small per-state tables (ready, scheduled,
running, blocked, failed); a job in none of them has finished. The verbs that
filter, annotate and count by state are models.job.states'.
"""

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from ..compat import TaskResultStatus

# Above this many rows, finished jobs are estimated, not counted.
COUNT_LIMIT = 10_000


class State(StrEnum):
    """Where a job stands; every state but FINISHED is a table of its own."""

    READY = "ready"
    SCHEDULED = "scheduled"
    RUNNING = "running"
    BLOCKED = "blocked"
    FAILED = "failed"
    FINISHED = "finished"
    # In no table and not finished: only seen inside a transaction that moves
    # a job between tables, or for a row changed by hand.
    UNKNOWN = "unknown"


STATES = tuple(state for state in State if state is not State.UNKNOWN)
# The states kept in their own tables: exact counts, cheap to read.
TABLED = (State.READY, State.SCHEDULED, State.RUNNING, State.BLOCKED, State.FAILED)

# django.tasks knows four statuses: waiting (for any reason) is READY.
TASK_RESULT_STATUS = {
    State.READY: TaskResultStatus.READY,
    State.SCHEDULED: TaskResultStatus.READY,
    State.BLOCKED: TaskResultStatus.READY,
    State.UNKNOWN: TaskResultStatus.READY,
    State.RUNNING: TaskResultStatus.RUNNING,
    State.FAILED: TaskResultStatus.FAILED,
    State.FINISHED: TaskResultStatus.SUCCESSFUL,
}


@dataclass(frozen=True, slots=True)
class Observed:
    """A job's state as read from the tables, with its claim if it is running."""

    state: State
    claimed_at: datetime | None = None
    claimed_by: str | None = None

    @property
    def status(self):
        """The django.tasks TaskResultStatus this state stands for."""
        return TASK_RESULT_STATUS[self.state]

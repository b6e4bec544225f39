"""What a job's page shows first: its error, and each of its attempts.

A job row keeps one error per failed attempt (``errors``) and one worker id
per run that ended (``worker_ids``), and three times of its own: when the
first attempt started (``started_at``), when the latest one started
(``last_attempted_at``) and when the job finished (``finished_at``). Each
error also keeps its attempt's start and end (``started_at``,
``finished_at``), also one failed by a process's death; an error written
before errors kept them has none, and the page says they were not stored.
"""

from dataclasses import dataclass
from datetime import datetime

from ..states import State

NOT_STORED = "not stored"


@dataclass(frozen=True, slots=True, kw_only=True)
class Failure:
    """An attempt's error: its class, the message, the whole traceback."""

    class_path: str
    message: str
    traceback: str

    @property
    def class_name(self):
        return self.class_path.rpartition(".")[2]


@dataclass(frozen=True, slots=True, kw_only=True)
class Attempt:
    """One run of a job, with what its row kept of it (None: not stored)."""

    number: int
    worker: str | None = None
    started_at: object = None
    ended_at: object = None
    failure: Failure | None = None
    running: bool = False

    @property
    def seconds(self):
        if self.started_at is None or self.ended_at is None:
            return None
        return max((self.ended_at - self.started_at).total_seconds(), 0.0)


def failure_of(error):
    """Read one stored error (``{"exception_class_path", "traceback"}``)."""
    path = error.get("exception_class_path") or "?"
    traceback = (error.get("traceback") or "").rstrip()
    lines = traceback.splitlines()
    last = lines[-1] if lines else path
    # The traceback's last line is "module.Class: message" (our own errors)
    # or "Class: message" (Python's): the message is what follows the class.
    message = last
    for prefix in (f"{path}:", f"{path.rpartition('.')[2]}:"):
        if last.startswith(prefix):
            message = last[len(prefix) :].strip()
            break
    if last in (path, path.rpartition(".")[2]):
        message = ""
    return Failure(class_path=path, message=message, traceback=traceback)


def attempts_of(job, observed):
    """Every attempt of the job, oldest first, the one running now last."""
    errors = list(job.errors or ())
    workers = list(job.worker_ids or ())
    # Runs that ended: each failed one left an error; the last one may have
    # succeeded (or snoozed) and left only its worker id.
    ended = max(len(errors), len(workers))
    # Worker ids line up with attempts only when every run left one.
    aligned = len(workers) == ended
    running = observed.state == State.RUNNING
    attempts = []
    for index in range(ended):
        first, last = index == 0, index == ended - 1
        started = job.started_at if first else None
        if last and not running:
            started = job.last_attempted_at or started
        finished = job.finished_at if last and not running else None
        if index < len(errors):
            started = _stored_time(errors[index], "started_at") or started
            finished = _stored_time(errors[index], "finished_at") or finished
        attempts.append(
            Attempt(
                number=index + 1,
                worker=workers[index] if aligned else None,
                started_at=started,
                ended_at=finished,
                failure=failure_of(errors[index]) if index < len(errors) else None,
            )
        )
    if running:
        attempts.append(
            Attempt(
                number=ended + 1,
                worker=observed.claimed_by,
                started_at=observed.claimed_at,
                running=True,
            )
        )
    return attempts


def last_failed(attempts):
    """The latest attempt that failed, or None."""
    return next((a for a in reversed(attempts) if a.failure is not None), None)


def _stored_time(error, key):
    """An attempt's time as its error entry keeps it, or None."""
    value = error.get(key)
    try:
        return datetime.fromisoformat(value) if value else None
    except (TypeError, ValueError):
        # A row edited by hand: the page shows what else the row kept.
        return None

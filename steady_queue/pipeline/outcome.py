"""Outcome: what running one claimed job produced, before it is recorded."""

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..exceptions import ResultNotStorableError, exception_class_of
from . import return_values
from .json_size import over_the_limit

# A return value is kept in the job row; bigger ones are refused (the job fails)
# rather than risking a write the database refuses (MariaDB's max_allowed_packet
# is 16 MiB by default, and a whole batch of outcomes travels together).
MAX_RESULT_BYTES = 1024 * 1024
# A traceback longer than this keeps its head and its tail (where the error is).
MAX_TRACEBACK_CHARS = 64 * 1024
TRACEBACK_HEAD_CHARS = 8 * 1024
# How deep arrays and objects may nest in a stored value (return_values.py's
# tags and envelope are levels too): MariaDB's JSON columns refuse 32, and
# only once the value is written, after the task (or a step's function) ran.
# Kept well under it, as the same rule holds on every database.
MAX_NESTING = 24
TOO_DEEP = (
    f"it is nested more than {MAX_NESTING} levels deep as stored (a list or "
    "dict counts one level, a tuple two)",
    "Return a flatter value.",
)
# A NUL as json.dumps writes it: \u0000 after an even number of backslashes
# (an odd number means the backslash itself was escaped: plain text).
ENCODED_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")
# When a job waiting for an event without a timeout is scheduled to run: never,
# in practice (an emit makes it ready), and within every database's range.
FOREVER = datetime(9000, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """The result of one run: success with a value, or failure with an error."""

    job: Any  # a claimed steady_queue.models.Job
    worker_id: str | None
    # When the run's claim was made: the attempt's start.
    claimed_at: datetime | None
    finished_at: datetime
    succeeded: bool
    return_value: Any = None
    # {"exception_class_path": ..., "traceback": ...}, the shape of a TaskError.
    error: dict | None = None
    # Kept so the finished signal can log the traceback once the outcome is saved.
    exception: BaseException | None = None
    # Set when a failed run will be attempted again (its task's retry policy),
    # or when the task snoozed: when it runs next.
    retry_at: datetime | None = None
    # The task raised Snooze: neither a success nor a failure, and no retry
    # spent; it runs again at retry_at.
    snoozed: bool = False
    # The Task that ran, or None if the job's task could not be loaded.
    task: Any = None
    # The task waits (wait_for_event, durable_sleep): the JobParked it raised.
    # Also snoozed; its finish records the wait (models/wait.py).
    parked: Any = None
    # The job keeps durable steps: they are deleted with its row.
    uses_steps: bool = False

    @property
    def exception_class(self):
        """The class of the error this run failed with, or None."""
        if self.exception is not None:
            return type(self.exception)
        if self.error is None:
            return None
        return exception_class_of(self.error)

    def apply_to(self, job):
        """Copy this outcome onto the job row's fields (not saved)."""
        # A run that will be retried leaves the job unfinished.
        job.finished_at = None if self.retry_at else self.finished_at
        job.started_at = job.started_at or self.claimed_at
        job.last_attempted_at = self.claimed_at
        if self.worker_id:
            job.count_run_by(self.worker_id)
        if self.succeeded:
            job.return_value = self.return_value
        elif not self.snoozed:
            job.add_error(self.error_with_times())
        return job

    def error_with_times(self):
        """The error as the job row keeps it: with its attempt's start and end.

        The row keeps only the first and the latest attempt's start, so each
        error carries its own, for the job's page to time every attempt.
        """
        times = {"finished_at": self.finished_at.isoformat()}
        if self.claimed_at is not None:
            times["started_at"] = self.claimed_at.isoformat()
        return {**self.error, **times}


def storable_return_value(value, task_path):
    """The task's return value as it will be stored; raises if it cannot be.

    ResultNotStorableError, naming the task and what was wrong, for a value
    neither JSON nor the tagged types (return_values.py) can express, or one a
    database would refuse.
    """
    try:
        return storable_value(value, task_path)
    except ResultNotStorableError as error:
        raise _not_storable(task_path, *error.args) from None


def storable_value(value, task_path):
    """A task's or a step's value as it is stored (return_values.py) once
    every database could store it; else ResultNotStorableError, whose args
    are ``(what was wrong, how to fix it)``."""
    if value is None:
        # What most tasks return, stored as it is: not encoded twice to
        # find that out (3 % of a drain's worker CPU).
        return None
    try:
        stored = return_values.storable_form(value, task_path)
    except RecursionError:
        raise ResultNotStorableError(*TOO_DEEP) from None
    refuse_unstorable(stored)
    return stored


def refuse_unstorable(value):
    """Raise ResultNotStorableError if no database could store this JSON value.

    PostgreSQL's jsonb refuses NaN, Infinity and NUL characters, MariaDB
    arrays and objects nested 32 deep (MAX_NESTING), and every database
    refuses text that is not valid Unicode: one rule for all three
    databases, so a task behaves the same wherever it runs. The error's args
    are ``(what was wrong, how to fix it)``.
    """
    if type(value) in _CONTAINERS and _nested_deeper(value, MAX_NESTING):
        raise ResultNotStorableError(*TOO_DEEP)
    try:
        encoded = json.dumps(value, allow_nan=False, ensure_ascii=False)
        size = len(encoded.encode("utf-8"))
    except UnicodeEncodeError:
        raise ResultNotStorableError(
            "it holds a string that is not valid Unicode (a lone surrogate)",
            "Return valid text, or encode bytes with base64.",
        ) from None
    except ValueError as error:
        raise ResultNotStorableError(
            f"{error} (NaN or Infinity)",
            "Return finite numbers, or strings such as 'nan'.",
        ) from None
    except RecursionError:
        raise ResultNotStorableError(*TOO_DEEP) from None
    if ENCODED_NUL.search(encoded):
        raise ResultNotStorableError(
            "it holds a NUL character (\\x00), which PostgreSQL cannot keep in JSON",
            "Encode binary data (base64) or strip the NULs.",
        )
    too_large = over_the_limit(size, MAX_RESULT_BYTES, "results")
    if too_large:
        raise ResultNotStorableError(
            too_large,
            "Store large output elsewhere (a file, a model) and return a "
            "reference to it.",
        )


def _nested_deeper(value, limit):
    """Whether arrays and objects nest more than ``limit`` deep in a JSON value
    (a walk of its containers, never deeper than the limit)."""
    level = [value]
    for _ in range(limit):
        level = [
            item
            for container in level
            for item in (container.values() if type(container) is dict else container)
            if type(item) in _CONTAINERS
        ]
        if not level:
            return False
    return True


_CONTAINERS = (dict, list)


def not_storable(task_path, error):
    """The ResultNotStorableError for a return value whose encoding raised."""
    return _not_storable(
        task_path,
        f"encoding it raised {type(error).__name__}: {error}",
        "Return JSON values or the types listed in the docs (results.rst).",
    )


def _not_storable(task_path, what, advice):
    return ResultNotStorableError(
        f"Task {task_path!r} returned a value that cannot be stored: {what}. "
        "The task did run; only its return value was lost, so the job failed "
        f"and is not retried, whatever its retry policy. {advice}"
    )


def storable_text(text):
    """Text safe to store in any database's JSON: NULs and lone surrogates
    escaped, and cut to MAX_TRACEBACK_CHARS (keeping the head and the tail)."""
    text = text.replace("\x00", "\\x00")
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    if len(text) > MAX_TRACEBACK_CHARS:
        tail = MAX_TRACEBACK_CHARS - TRACEBACK_HEAD_CHARS
        cut = len(text) - MAX_TRACEBACK_CHARS
        text = (
            f"{text[:TRACEBACK_HEAD_CHARS]}\n... {cut:,} characters cut ...\n"
            f"{text[-tail:]}"
        )
    return text

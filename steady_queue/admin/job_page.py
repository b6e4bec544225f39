"""What a job's page shows first: its state in words, its error, and each
of its attempts.

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

from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from ..models import BlockedExecution, Job, JobDependency, ScheduledExecution
from ..models.admission import RATE
from ..states import State

NOT_STORED = _("not stored")


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
    # How many attempts just before this one the row no longer keeps.
    not_kept_before: int = 0
    # It failed, but the row kept only its first and latest errors.
    error_not_kept: bool = False

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
    """Every attempt of the job the row still tells of, oldest first, the one
    running now last; an attempt after a gap of ones the row no longer keeps
    says how many (``not_kept_before``)."""
    errors = list(job.errors or ())
    workers = list(job.worker_ids or ())
    # Runs that ended: each failed one left an error; the last one may have
    # succeeded (or snoozed) and left only its worker id. Past its bounds the
    # row keeps the first error and the latest ones, and the latest workers,
    # and counts the rest (errors_dropped, runs_dropped).
    error_count = len(errors) + job.errors_dropped
    ended = max(error_count, len(workers) + job.runs_dropped)
    errors_by_number = dict(
        zip(_error_numbers(len(errors), error_count), errors, strict=True)
    )
    # Worker ids line up with attempts only when every run left one.
    aligned = len(workers) + job.runs_dropped == ended
    first_worker = ended - len(workers) + 1
    shown = sorted(
        {*errors_by_number, *range(first_worker, ended + 1)}
        if job.errors_dropped or job.runs_dropped
        else range(1, ended + 1)
    )
    running = observed.state == State.RUNNING
    attempts = []
    for number in shown:
        first, last = number == 1, number == ended
        started = job.started_at if first else None
        if last and not running:
            started = job.last_attempted_at or started
        finished = job.finished_at if last and not running else None
        error = errors_by_number.get(number)
        if error is not None:
            started = _stored_time(error, "started_at") or started
            finished = _stored_time(error, "finished_at") or finished
        attempts.append(
            Attempt(
                number=number,
                worker=workers[number - first_worker]
                if aligned and number >= first_worker
                else None,
                started_at=started,
                ended_at=finished,
                failure=None if error is None else failure_of(error),
                error_not_kept=error is None and number <= error_count,
                not_kept_before=number - 1 - (attempts[-1].number if attempts else 0),
            )
        )
    if running:
        attempts.append(
            Attempt(
                number=ended + 1,
                worker=observed.claimed_by,
                started_at=observed.claimed_at,
                running=True,
                not_kept_before=ended - (attempts[-1].number if attempts else 0),
            )
        )
    return attempts


def _error_numbers(kept, count):
    """The attempt each kept error came from: all of them in order, or, once
    some were dropped, the first and then the latest ``kept - 1``."""
    if kept == count:
        return range(1, kept + 1)
    return [1, *range(count - kept + 2, count + 1)]


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


# How many jobs a job's page lists of those it waits for, and of those that
# wait for it (a fan-in or fan-out may have thousands).
RELATED_SHOWN = 50


@dataclass(frozen=True, slots=True, kw_only=True)
class RelatedJob:
    """A job another waits for, or that waits for another: None for the
    task path and state of one whose row is gone (cleared or discarded)."""

    job_id: int
    task_path: str | None = None
    state: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Dependencies:
    """What a job waits (or waited) for and what waits (or waited) for it,
    each at most RELATED_SHOWN of them, with how many more there are, and
    how many of its own it still waits for (None: it waits for none now)."""

    waits_for: list
    waits_for_more: int
    waited_by: list
    waited_by_more: int
    pending: int | None

    def __bool__(self):
        return bool(self.waits_for or self.waited_by)


def dependencies_of(job):
    """The Dependencies of a job, for its page."""
    database = job._state.db
    edges = JobDependency.objects.using(database)
    waits_for = edges.dependencies_of(job.pk)
    waited_by = edges.dependents_of(job.pk) if job.has_dependents else []
    pending = (
        BlockedExecution.objects.using(database)
        .waiting_on_dependencies()
        .filter(job_id=job.pk)
        .values_list("dependencies_pending", flat=True)
        .first()
    )
    return Dependencies(
        waits_for=_related(database, waits_for[:RELATED_SHOWN]),
        waits_for_more=max(len(waits_for) - RELATED_SHOWN, 0),
        waited_by=_related(database, waited_by[:RELATED_SHOWN]),
        waited_by_more=max(len(waited_by) - RELATED_SHOWN, 0),
        pending=pending,
    )


def _related(database, ids):
    """RelatedJobs of these ids, in their order, with their states."""
    rows = (
        Job.objects.using(database)
        .filter(pk__in=ids)
        .with_state()
        .values_list("pk", "task_path", "state")
    )
    found = {pk: (path, state) for pk, path, state in rows}
    return [
        RelatedJob(job_id=pk, task_path=found[pk][0], state=found[pk][1])
        if pk in found
        else RelatedJob(job_id=pk)
        for pk in ids
    ]


@dataclass(frozen=True, slots=True, kw_only=True)
class Story:
    """A job's state in words, the first line of its page: ``headline``,
    then ``moment_label`` and ``moment`` ("finished 3 s ago", "timing out in
    4 min") if any; ``tone``
    colours it: "ok", "alarm", "waiting" or "running"."""

    tone: str
    headline: str
    moment_label: str = ""
    moment: datetime | None = None


def failed_without_running(job, state):
    """Whether the job, in ``state``, failed with no run at all: a dependency
    failed, or its task could not be loaded. Its error is no attempt's, and
    it counts no attempt, as get_result() counts them."""
    return state == State.FAILED and not job.attempts


def story_of(job, observed, attempts, wait, dependencies):
    """The Story of a job from what its page already read: the Observed
    state, attempts_of(), the ShownWait (or None) and dependencies_of()."""
    state = observed.state
    # Each failed attempt left an error; a parked run is not a failure.
    failures = job.error_count
    if state == State.FINISHED:
        headline = (
            ngettext(
                "Succeeded after %(count)s failed attempt",
                "Succeeded after %(count)s failed attempts",
                failures,
            )
            % {"count": failures}
            if failures
            else gettext("Succeeded")
        )
        return Story(
            tone="ok",
            headline=headline,
            # Translators: before a time on a job's page, as in
            # "finished 3 seconds ago".
            moment_label=gettext("finished"),
            moment=job.finished_at,
        )
    if state == State.FAILED:
        if failed_without_running(job, state):
            headline = gettext("Failed without running")
        elif failures:
            headline = ngettext(
                "Failed after %(count)s attempt",
                "Failed after %(count)s attempts",
                failures,
            ) % {"count": failures}
        else:
            headline = gettext("Failed")
        return Story(
            tone="alarm",
            headline=headline,
            moment_label=gettext("finished"),
            moment=job.finished_at,
        )
    if state == State.RUNNING:
        running = attempts[-1] if attempts and attempts[-1].running else None
        number = running.number if running else len(attempts) + 1
        # The attempt's number is its rank, not a count: no plural forms.
        headline = (
            gettext("Running attempt %(number)s on %(worker)s")
            % {"number": number, "worker": observed.claimed_by}
            if observed.claimed_by
            else gettext("Running attempt %(number)s") % {"number": number}
        )
        return Story(
            tone="running",
            headline=headline,
            # Translators: before a time on a job's page, as in
            # "started 3 seconds ago".
            moment_label=gettext("started"),
            moment=observed.claimed_at,
        )
    if state == State.SCHEDULED and wait is not None:
        if wait.event_name is None:
            return Story(
                tone="waiting",
                headline=gettext("Sleeping (a durable sleep)"),
                # Translators: before a time on a job's page, as in
                # "waking in 4 minutes".
                moment_label=gettext("waking"),
                moment=wait.until,
            )
        event = repr(wait.event_name)
        if wait.until is None:
            return Story(
                tone="waiting",
                headline=gettext("Waiting for the event %(event)s, with no timeout")
                % {"event": event},
            )
        return Story(
            tone="waiting",
            headline=gettext("Waiting for the event %(event)s") % {"event": event},
            # Translators: before a time on a job's page, as in
            # "timing out in 4 minutes".
            moment_label=gettext("timing out"),
            moment=wait.until,
        )
    if state == State.SCHEDULED:
        headline = (
            ngettext(
                "Scheduled, a retry after %(count)s failed attempt",
                "Scheduled, a retry after %(count)s failed attempts",
                failures,
            )
            % {"count": failures}
            if failures
            else gettext("Scheduled")
        )
        return Story(
            tone="waiting",
            headline=headline,
            # Translators: before a time on a job's page, as in
            # "due in 4 minutes".
            moment_label=gettext("due"),
            # A retry's or a snooze's time is its scheduled row's: the job's
            # own scheduled_at is the run_after it was enqueued with.
            moment=scheduled_at_of(job),
        )
    if state == State.BLOCKED:
        return Story(tone="waiting", headline=_blocked_on(job, dependencies))
    if state == State.READY:
        queue = repr(job.queue_name)
        headline = (
            ngettext(
                "Ready, a retry after %(count)s failed attempt: waiting for a "
                "worker of queue %(queue)s",
                "Ready, a retry after %(count)s failed attempts: waiting for a "
                "worker of queue %(queue)s",
                failures,
            )
            % {"count": failures, "queue": queue}
            if failures
            else gettext("Ready: waiting for a worker of queue %(queue)s")
            % {"queue": queue}
        )
        return Story(tone="waiting", headline=headline)
    return Story(tone="alarm", headline=gettext("Its state cannot be read"))


def _blocked_on(job, dependencies):
    if dependencies.pending is not None:
        return ngettext(
            "Blocked until %(count)s job it depends on end",
            "Blocked until %(count)s jobs it depends on end",
            dependencies.pending,
        ) % {"count": dependencies.pending}
    blocked = (
        BlockedExecution.objects.using(job._state.db)
        .filter(job_id=job.pk)
        .values_list("waits_for", "concurrency_key")
        .first()
    )
    if blocked is None:
        return gettext("Blocked")
    waits_for, key = blocked
    if waits_for == RATE:
        return gettext("Blocked until the rate limit %(key)s lets it start") % {
            "key": repr(key)
        }
    return gettext("Blocked until a slot of the concurrency limit %(key)s is free") % {
        "key": repr(key)
    }


def scheduled_at_of(job):
    """When a scheduled job becomes ready: its scheduled row's time."""
    rows = ScheduledExecution.objects.using(job._state.db)
    return rows.due_at(job.pk) or job.scheduled_at

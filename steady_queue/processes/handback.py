"""Handbacks: what a worker does with jobs whose task it cannot load.

During a rolling deploy two releases run side by side: new web code enqueues
a task old workers do not have yet, old web code one the new workers dropped.
A worker that cannot load a job's task hands the job back (no attempt
counted, its version written on the job), all of a claim's such jobs in one
transaction:

- while a live worker of a code version that has not tried the job serves
  its queue, ready at once for it: the workers of the version that handed it
  back do not claim it again (ReadyExecution's ``handed_back_by``) until the
  live versions change. A limited job waits ``handback_delay`` instead, and
  passes its limits again;
- while none does, it is **held**: it waits, unclaimed, until
  ``handback_grace`` has passed since such a worker was last seen (a new
  release's workers may still be starting), and is then failed, with an
  error naming the versions that tried. Within ``handback_delay`` of a
  worker of a version that has not tried it appearing, a worker makes it
  ready (wake_held).

A grace of 0 fails it at once. The log has one warning per task and kind of
handback per REPORT_INTERVAL, with the reason and the fix.
"""

import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from ..dialects.isolation import atomic
from ..exceptions import TaskNotFoundError
from ..models import ClaimedExecution, Process, ReadyExecution, ScheduledExecution
from ..models.fields import UnreadableJSON
from ..models.process import describe_version
from .queue_selector import QueueSelector

logger = logging.getLogger("steady_queue")

# Seconds between two warnings about one task's handbacks by one worker.
REPORT_INTERVAL = 60.0
# A held job is due this long after its grace ends: a clock that lags the
# database's by less finds the grace over when it claims the job.
HOLD_MARGIN = timedelta(seconds=1)
# A scheduled row is a job's hold when its time is the record's held_until.
HOLD_MATCH = timedelta(milliseconds=1)


@dataclass(frozen=True, slots=True)
class Decision:
    """Hand back with ``handbacks`` written on the job: for the live workers
    of the ``untried`` versions, or to run at ``run_at`` (``held``: no worker
    of a version that has not tried it is alive); or fail with ``error``."""

    handbacks: dict | None = None
    run_at: datetime | None = None
    held: bool = False
    untried: tuple = ()
    error: BaseException | None = None


def decide(job, error, *, version, live_versions, now, grace, delay=0.0):
    """Whether a worker of ``version`` that could not load ``job``'s task
    (``error``) hands it back or fails it, given the code versions of the
    live workers that serve its queue and the database's ``now``; ``delay``
    is how long a limited job handed back to another version waits."""
    if grace <= 0:
        return Decision(error=error)
    try:
        record = read_record(job.handbacks)
    except ValueError as unreadable:
        return Decision(error=_record_unreadable(job, error, unreadable))
    last = max(filter(None, (record["last_at"], record["held_until"])), default=None)
    if last is not None and (now - last).total_seconds() > grace + delay:
        # Not handed back for longer than the grace: the job was retried by
        # an operator, or no worker claimed it for that long (all were down).
        # Either way the versions to wait for are those alive from now on.
        record = read_record(None)
    tried = sorted({*record["versions"], version})
    since = record["since"] or now
    seen = record["others_seen_at"] or since
    untried = sorted(set(live_versions) - set(tried))
    if untried:
        seen = now
    if (now - seen).total_seconds() >= grace:
        return Decision(error=_no_version_can(job, error, tried, since, grace))
    handbacks = {
        "since": since.isoformat(),
        "others_seen_at": seen.isoformat(),
        "last_at": now.isoformat(),
        "versions": tried,
        "count": record["count"] + 1,
        "last_error": str(error)[:500],
    }
    if untried:
        # Ready at once for them: this version's workers leave it.
        return Decision(handbacks=handbacks, untried=tuple(untried))
    # No version that could run it is alive: claiming it again every delay
    # costs the queue a claim and a handback each time, for nothing.
    held_until = seen + timedelta(seconds=grace) + HOLD_MARGIN
    handbacks["held_until"] = held_until.isoformat()
    return Decision(handbacks=handbacks, run_at=held_until, held=True)


def read_record(stored):
    """The handback record a job's ``handbacks`` column holds, checked: its
    times as aware datetimes (or None), its versions and count. Raise
    ValueError saying what is wrong with a value not written by decide()."""
    if stored is None:
        stored = {}
    if isinstance(stored, UnreadableJSON):
        raise ValueError(f"a value that does not decode ({stored.error})")
    if not isinstance(stored, dict):
        raise ValueError(f"{stored!r}, not an object")
    record = {name: _time(stored, name) for name in TIMES}
    versions = stored.get("versions", [])
    if not isinstance(versions, list) or not all(
        isinstance(version, str) for version in versions
    ):
        raise ValueError(f"versions {versions!r}, not a list of strings")
    count = stored.get("count", 0)
    if type(count) is not int or count < 0:
        raise ValueError(f"count {count!r}, not a whole number")
    return {**record, "versions": versions, "count": count}


# The times a handback record holds, ISO 8601 with a UTC offset.
TIMES = ("since", "others_seen_at", "last_at", "held_until")


def _time(stored, name):
    text = stored.get(name)
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        raise ValueError(f"{name} {text!r}, not an ISO 8601 time") from None
    if moment.utcoffset() is None:
        raise ValueError(f"{name} {text!r}, a time without its UTC offset")
    return moment


def _record_unreadable(job, error, unreadable):
    failed = TaskNotFoundError(
        f"The task {job.task_path!r} could not be loaded, and its handbacks "
        f"column holds {unreadable}, which no worker wrote: whether another "
        "code version may run it cannot be told. Deploy code that defines the "
        "task and retry the job (a job whose task loads never reads the "
        "column), or discard it. The load error: "
        f"{error}"
    )
    failed.__cause__ = error
    return failed


def _no_version_can(job, error, tried, since, grace):
    versions = ", ".join(describe_version(version) for version in tried)
    failed = TaskNotFoundError(
        f"No live code version could load the task {job.task_path!r}: tried by "
        f"{versions} (handed back since {since:%Y-%m-%d %H:%M:%S%z}), and no "
        f"worker of another version was alive for {grace:g} s (the "
        "'handback_grace' option). Deploy code that defines it and retry the "
        f"job, or discard it. The last error: {error}"
    )
    failed.__cause__ = error
    return failed


def versions_serving(queue_lists, backend, queue):
    """The code versions of ``queue_lists`` (Process's queue_lists_by_version)
    with a worker of ``backend`` whose queue list takes ``queue``."""
    return [
        version
        for version, lists in queue_lists.items()
        if any(
            alias == backend and QueueSelector(queues, None).serves(queue)
            for alias, queues in lists
        )
    ]


class Handbacks:
    """A worker's handbacks of jobs whose task it could not load."""

    def __init__(self, database, options, version, description):
        self.database = database
        self.options = options
        self.version = version
        self.description = description
        self.reports = Reports(self.description, version)
        # The live workers' versions at wake_held's last look, and when next.
        self.versions_seen = frozenset()
        self.next_wake_check = 0.0

    def hand_back_or_fail(self, unloadable, process_id):
        """Hand back the claimed jobs of ``unloadable`` (``(claim, load
        error)`` pairs) in one transaction; return ``(claim, the error to fail
        it with)`` for the others."""
        if self.options.handback_grace <= 0:
            return list(unloadable)
        processes = Process.objects.using(self.database)
        now = processes.database_now()
        live = processes.alive(self.options.process_alive_threshold, now)
        queue_lists = live.filter(kind="worker").queue_lists_by_version()
        failures, records, decisions = [], {}, []
        for claim, error in unloadable:
            job = claim.job
            decision = decide(
                job,
                error,
                version=self.version,
                live_versions=versions_serving(
                    queue_lists, job.backend_name, job.queue_name
                ),
                now=now,
                grace=self.options.handback_grace,
                delay=self.options.handback_delay,
            )
            if decision.error is not None:
                failures.append((claim, decision.error))
            else:
                records[job.pk] = (decision.handbacks, decision.run_at)
                decisions.append((job, error, decision))
        if records:
            claims = ClaimedExecution.objects.using(self.database).held_by(process_id)
            claims.filter(job_id__in=list(records)).hand_back(
                records, self.version, self.options.handback_delay
            )
        for job, error, decision in decisions:
            self.reports.handed_back(job, error, decision, self.options)
        return failures

    def wake_held(self):
        """Make ready now the held jobs that a live worker of a version that
        has not tried them would take; return their ids.

        Looked at every handback_delay (a worker's first poll included), and
        only when the live workers' versions changed since the last look:
        a release that starts (or comes back) is the version they wait for.
        Releases from before holds never wake them; this release's workers
        do it for them.
        """
        now = time.monotonic()
        if now < self.next_wake_check:
            return []
        self.next_wake_check = now + self.options.handback_delay
        processes = Process.objects.using(self.database)
        live = processes.alive(self.options.process_alive_threshold)
        queue_lists = live.filter(kind="worker").queue_lists_by_version()
        versions = frozenset(queue_lists)
        if versions == self.versions_seen:
            return []
        gone = self.versions_seen - versions
        self.versions_seen = versions
        if gone or versions <= {self.version}:
            # The versions the jobs this one left were for may be gone:
            # claimed again, they are handed back for those alive, or held.
            ReadyExecution.objects.using(self.database).steer_back(self.version)
        scheduled = ScheduledExecution.objects.using(self.database)
        # {job id: the version that handed it back last}: made ready, each is
        # left for the others, as a handback for a live version is, or that
        # version's workers (idle, as they hold nothing) claim it back first.
        left_by = {
            job_id: _last_version(stored)
            for job_id, queue, backend, scheduled_at, stored in (
                scheduled.held_handbacks(self.options.handback_grace)
            )
            if _wakes(
                stored, scheduled_at, versions_serving(queue_lists, backend, queue)
            )
        }
        ids = list(left_by)
        if ids:
            with atomic(using=self.database):
                scheduled.filter(job_id__in=ids).make_ready_now()
                ready = ReadyExecution.objects.using(self.database)
                ready.leave_for_other_versions(left_by)
            logger.info(
                "%s: made ready %s held job(s) that a live worker of a version "
                "that has not tried them may run",
                self.description,
                len(ids),
            )
        return ids


def _last_version(stored):
    """The version that handed a job back last, from its ``handbacks``."""
    versions = read_record(stored)["versions"]
    return versions[-1] if versions else None


def _wakes(stored, scheduled_at, serving):
    """Whether a held job (its ``handbacks`` and scheduled time) has a live
    worker of a version that has not tried it among ``serving``."""
    try:
        record = read_record(stored)
    except ValueError:
        return False  # the worker that claims it at its time fails it
    held_until = record["held_until"]
    # Its own hold, not a later retry's wait (which keeps the record).
    if held_until is None or abs(held_until - scheduled_at) > HOLD_MATCH:
        return False
    return bool(set(serving) - set(record["versions"]))


class Reports:
    """One warning per task and kind of handback per REPORT_INTERVAL: the
    first at once, the next with how many were handed back meanwhile."""

    def __init__(self, description, version):
        self.description = description
        self.version = version
        # (task path, held) -> [when last logged (monotonic), count since]
        self.last = {}

    def handed_back(self, job, error, decision, options):
        key = (job.task_path, decision.held)
        logged, count = self.last.get(key, (None, 0))
        count += 1
        now = time.monotonic()
        if logged is not None and now - logged < REPORT_INTERVAL:
            self.last[key] = (logged, count)
            return
        self.last[key] = (now, 0)
        logger.warning(
            "%s (code version %s) cannot load the task %r (%s): %s",
            self.description,
            describe_version(self.version),
            job.task_path,
            error,
            _explain(job, decision, count, options),
        )


def _explain(job, decision, count, options):
    jobs = f"{count} job(s) handed back, the last {job.pk},"
    if not decision.held:
        versions = ", ".join(describe_version(v) for v in decision.untried)
        return (
            f"{jobs} for a live worker of {versions}, which serves queue "
            f"{job.queue_name!r} and has not tried them. Nothing to do during a "
            "rolling deploy; if no version defines the task, deploy code that "
            "does, or discard the jobs: they fail once no worker of a version "
            f"that has not tried them has been alive for "
            f"{options.handback_grace:g} s ('handback_grace')."
        )
    return (
        f"{jobs} are held: no live worker of another code version serves queue "
        f"{job.queue_name!r}. They wait, unclaimed, until "
        f"{decision.run_at:%Y-%m-%d %H:%M:%S%z} ('handback_grace', "
        f"{options.handback_grace:g} s), and then fail; a worker of a version "
        "that has not tried them makes them ready when it starts. Start the "
        "release that defines the task (or fix its tasks module's import), or "
        "discard the jobs."
    )

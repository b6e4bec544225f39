"""Handbacks: what a worker does with a job whose task it cannot load.

During a rolling deploy two releases run side by side: new web code enqueues
a task old workers do not have yet, old web code one the new workers dropped.
A worker that cannot load a job's task hands the job back (to run again
``handback_delay`` seconds later, no attempt counted, its version written on
the job) while a live worker of a code version that has not tried it yet
runs, and for ``handback_grace`` seconds after the last one was seen: a new
release's workers may still be starting. Past that the job fails, with an
error naming the versions that tried. A grace of 0 fails it at once.
"""

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone

from ..exceptions import TaskNotFoundError
from ..models import ClaimedExecution, Process
from ..models.fields import UnreadableJSON
from ..models.process import describe_version

logger = logging.getLogger("steady_queue")


@dataclass(frozen=True, slots=True)
class Decision:
    """Hand back with ``handbacks`` written on the job, or fail with ``error``."""

    handbacks: dict | None = None
    error: BaseException | None = None


def decide(job, error, *, version, live_versions, now, grace, delay=0.0):
    """Whether a worker of ``version`` that could not load ``job``'s task
    (``error``) hands it back or fails it, given the code versions of the
    live workers and the database's ``now``; ``delay`` is how long a handed
    back job waits."""
    if grace <= 0:
        return Decision(error=error)
    try:
        record = read_record(job.handbacks)
    except ValueError as unreadable:
        return Decision(error=_record_unreadable(job, error, unreadable))
    last = record["last_at"]
    if last is not None and (now - last).total_seconds() > grace + delay:
        # Not handed back for longer than the grace: the job was retried by
        # an operator, or no worker claimed it for that long (all were down).
        # Either way the versions to wait for are those alive from now on.
        record = read_record(None)
    tried = sorted({*record["versions"], version})
    since = record["since"] or now
    seen = record["others_seen_at"] or since
    untried = set(live_versions) - set(tried)
    if untried:
        seen = now
    if (now - seen).total_seconds() >= grace:
        return Decision(error=_no_version_can(job, error, tried, since, grace))
    return Decision(
        handbacks={
            "since": since.isoformat(),
            "others_seen_at": seen.isoformat(),
            "last_at": now.isoformat(),
            "versions": tried,
            "count": record["count"] + 1,
            "last_error": str(error)[:500],
        }
    )


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
TIMES = ("since", "others_seen_at", "last_at")


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


class Handbacks:
    """A worker's handbacks of jobs whose task it could not load."""

    def __init__(self, database, options, version, description):
        self.database = database
        self.options = options
        self.version = version
        self.description = description

    def hand_back_or_fail(self, claim, process_id, error):
        """Hand the claimed job back; return None, or the error to fail it with."""
        job = claim.job
        if self.options.handback_grace <= 0:
            return error
        processes = Process.objects.using(self.database)
        now = processes.database_now()
        live = processes.alive(self.options.process_alive_threshold, now)
        decision = decide(
            job,
            error,
            version=self.version,
            live_versions=live.filter(kind="worker").running_versions(),
            now=now,
            grace=self.options.handback_grace,
            delay=self.options.handback_delay,
        )
        if decision.error is not None:
            return decision.error
        run_at = timezone.now() + timedelta(seconds=self.options.handback_delay)
        claims = ClaimedExecution.objects.using(self.database).held_by(process_id)
        claims.filter(job_id=job.pk).hand_back(decision.handbacks, run_at)
        logger.warning(
            "%s (code version %s): cannot load the task of job %s (%s); handed it "
            "back for a worker of another version, to run again at %s",
            self.description,
            describe_version(self.version),
            job.pk,
            job.task_path,
            run_at.isoformat(),
        )
        return None

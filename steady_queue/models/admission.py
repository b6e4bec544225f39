"""Admission: whether saved jobs pass their limits now, decided with every
semaphore and rate window they need locked, in one order.

A job passes its concurrency limits first, all of them or none: with a slot of
each of its keys it goes on to its rate limits; without, it waits (blocked)
on the first full key, holding nothing. Then its rate limits, all or none:
with room in each of its windows it is ready and takes a start in each;
without, it waits on the first full window, keeping the concurrency slots it
took (so the rate goes to jobs that can run). Or, where its limit says so,
it is discarded.

Every transaction locks semaphores before rate windows, and each kind in key
order, so two of them never wait on each other in a cycle. A release, which
already holds the semaphores it gave slots back to, may need a lock out of
that order for the next job: it takes it only if free at once (NOWAIT), and
otherwise leaves the job for a second look once it has committed.
"""

from collections import Counter
from dataclasses import dataclass
from datetime import datetime

from django.db import connections
from django.utils import timezone

from ..dialects.isolation import runs_stricter
from ..exceptions import ConcurrencyLimitDiscarded, RateLimitDiscarded, error_payload
from .base import RowBusy
from .rate_start import RateStart
from .rate_window import RateWindow
from .semaphore import Semaphore, slot_duration

# Where a job goes.
READY = "ready"
BLOCKED = "blocked"
DISCARDED = "discarded"
# Not decided: a lock it needs is held elsewhere and could not be waited for.
DEFERRED = "deferred"

# What a blocked job waits for (BlockedExecution.waits_for).
CONCURRENCY = "concurrency"
RATE = "rate"
# The jobs it was enqueued to wait for (models/job_dependency.py): never
# released by a concurrency or rate release, only by its last dependency's end.
DEPENDENCIES = "dependency"


@dataclass(frozen=True, slots=True)
class Decision:
    """Where one job goes: ready, blocked (waiting for ``waits_for`` under
    ``key`` until about ``until``), discarded (with ``error``) or deferred."""

    outcome: str
    waits_for: str | None = None
    key: str | None = None
    until: datetime | None = None
    error: dict | None = None


class Admission:
    """Decides, job by job, whether saved jobs pass their limits now, inside
    the caller's transaction; write() then takes the slots and starts.

    ``out_of_order`` (releases only): a lock that would be taken out of key
    order is not waited for; the job is DEFERRED instead.
    """

    def __init__(self, db, now=None, out_of_order=False):
        self.db = db
        self.now = now or timezone.now()
        self.out_of_order = out_of_order
        self.semaphores = Semaphore.objects.using(db)
        self.rate_windows = RateWindow.objects.using(db)
        # key -> free slots as locked; key -> slots taken here; key -> duration.
        self.free = {}
        self.taken = Counter()
        self.durations = {}
        # Semaphore keys the caller's transaction holds already (a release).
        self.held = set()
        # key -> Window, locked.
        self.windows = {}
        self._database_now = None
        # Where transactions may run at REPEATABLE READ or SERIALIZABLE, a
        # window's row is written by every admission to it, not only when
        # its next slot moves: a transaction whose snapshot is older than
        # another's admission then fails to lock it (PostgreSQL's
        # serialization failure) rather than count without that start.
        self.writes_each_admission = runs_stricter(connections[db])

    @property
    def database_now(self):
        """The database's clock, read once: rate windows and slot expiries
        are judged by it, whichever host runs this."""
        if self._database_now is None:
            self._database_now = self.semaphores.database_now()
        return self._database_now

    def holds(self, keys):
        """The caller's transaction holds these semaphores (it gave back their
        slots): a lock of a lower key after them is out of order."""
        self.held.update(keys)

    def adopt_window(self, key):
        """Lock the window of a rate key whose waiting jobs are let go, unless
        another transaction holds it (it is letting them go, or enqueuing
        under the key): then return False."""
        window = self.rate_windows.open(
            key, skip_locked=True, now=self.database_now, look=True
        )
        if window is None:
            return False
        self.windows[key] = window
        return True

    def lock_all(self, jobs, limits):
        """Lock every semaphore, then every window, these jobs may need, each
        kind in key order: before anything is decided, so that deciding
        takes no lock out of that order."""
        semaphores, windows = {}, {}
        for job in jobs:
            found = limits.get(job.pk)
            if found is None:
                continue
            for key, limit in found.concurrency_pairs(job.concurrency_keys):
                semaphores.setdefault(key, (limit, job.backend_name))
            windows.update(dict(found.rate_pairs(job.rate_keys)))
        self._lock_semaphores(semaphores)
        self._lock_windows(windows)

    def place(self, job, limits, releasing=None, holds_concurrency=False):
        """Decide where a job goes; return a Decision.

        ``releasing`` is the (waits_for, key) whose waiting jobs are being let
        go: that window's queue is the job's own. ``holds_concurrency``: the
        job waited for a rate window, holding its concurrency slots already.
        """
        concurrency, rate = _wanted(job, limits, holds_concurrency)
        try:
            self._lock_semaphores(
                {key: (limit, job.backend_name) for key, limit in concurrency.items()}
            )
            for key in sorted(concurrency):
                if self.free[key] - self.taken[key] <= 0:
                    return self._no_slot(job, key, concurrency[key])
            self._lock_windows(rate)
        except RowBusy:
            return Decision(DEFERRED)
        for key in sorted(rate):
            window = self.windows[key]
            queued = window.waiting and releasing != (RATE, key)
            if window.room > 0 and not queued:
                continue
            # A job that holds its slots has started before (handed back
            # from a claim): it waits for its next start, not discarded.
            if rate[key].on_limit == "discard" and not holds_concurrency:
                return Decision(DISCARDED, error=_rate_discarded(key, rate[key]))
            self.taken.update(concurrency.keys())
            window.waiting = True
            return Decision(BLOCKED, RATE, key, window.next_opening())
        self.taken.update(concurrency.keys())
        for key in rate:
            self.windows[key].admit(job.pk)
        return Decision(READY)

    def force(self, job, limits, holds_concurrency=False):
        """Let a job through its limits whatever they say (an operator's run
        now): it takes a slot of each key even if none is free, and a start
        in each window even if it is full. Its finish gives back exactly what
        it took, so the runs after it still keep to the limits."""
        concurrency, rate = _wanted(job, limits, holds_concurrency)
        self._lock_semaphores(
            {key: (limit, job.backend_name) for key, limit in concurrency.items()}
        )
        self._lock_windows(rate)
        self.taken.update(concurrency.keys())
        for key in rate:
            self.windows[key].admit(job.pk)

    def stop_waiting(self, key):
        """No job waits on this window any more (its queue was emptied)."""
        if key in self.windows:
            self.windows[key].waiting = False

    def write(self):
        """Take the slots and starts decided, and tell each window with jobs
        waiting when to let the next ones go."""
        now = self.database_now if (self.taken or self.windows) else None
        for key, count in sorted(self.taken.items()):
            self.semaphores.filter(key=key).take(
                count, now + self.durations[key], self.now
            )
        admitted = [
            (key, job_id)
            for key, window in sorted(self.windows.items())
            for job_id in window.admitted
        ]
        if admitted:
            periods = {key: window.period for key, window in self.windows.items()}
            RateStart.objects.using(self.db).record(admitted, periods, now)
        next_slots = {
            window.pk: next_slot
            for window in self.windows.values()
            if (next_slot := window.next_opening() if window.waiting else None)
            != window.next_slot_at
            or (window.admitted and self.writes_each_admission)
        }
        if next_slots:
            self.rate_windows.set_next_slots(next_slots, now)

    def _no_slot(self, job, key, limit):
        if limit.on_conflict == "discard":
            return Decision(DISCARDED, error=_concurrency_discarded(key, limit))
        until = self.now + slot_duration(limit, job.backend_name)
        return Decision(BLOCKED, CONCURRENCY, key, until)

    def _lock_semaphores(self, wanted):
        """Lock (creating) the semaphores of {key: (ConcurrencyLimit, backend
        alias)} not locked yet, in key order."""
        for key in sorted(set(wanted) - set(self.free)):
            limit, backend_name = wanted[key]
            duration = slot_duration(limit, backend_name)
            after = self.windows or any(
                held > key for held in self.held | set(self.free)
            )
            self.free[key] = self.semaphores.lock(
                key,
                limit.to,
                self.database_now + duration,
                nowait=self.out_of_order and bool(after),
            )
            self.durations[key] = duration

    def _lock_windows(self, wanted):
        """Lock (creating) the windows of {key: RateLimit} not locked yet, in
        key order, and read the starts that count in them now."""
        for key in sorted(set(wanted) - set(self.windows)):
            after = any(held > key for held in self.windows)
            self.windows[key] = self.rate_windows.open(
                key,
                wanted[key],
                nowait=self.out_of_order and after,
                now=self.database_now,
            )


def _wanted(job, limits, holds_concurrency):
    """({concurrency key: limit}, {rate key: limit}) a job must pass; no
    concurrency keys for one that holds its slots already."""
    concurrency = (
        {}
        if holds_concurrency
        else dict(limits.concurrency_pairs(job.concurrency_keys))
    )
    return concurrency, dict(limits.rate_pairs(job.rate_keys))


def _concurrency_discarded(key, limit):
    return error_payload(
        ConcurrencyLimitDiscarded,
        f"Not run: all {limit.to} slot(s) of the concurrency key {key!r} were "
        'taken, and the task\'s limit says on_conflict="discard".',
    )


def _rate_discarded(key, limit):
    return error_payload(
        RateLimitDiscarded,
        f"Not run: the rate key {key!r} had no room for another start (at most "
        f"{limit.to} per {limit.per:g} s), and the task's limit says "
        'on_limit="discard".',
    )

"""TaskPlan: which tick of one recurring task a scheduler enqueues next."""

from datetime import timedelta

# A tick this late was missed, not delayed: the scheduler was stopped, asleep
# or cut off from the database. Missed ticks follow the task's `missed` policy
# instead of being enqueued one by one.
MAX_LATENESS = timedelta(seconds=60)


class TaskPlan:
    """The next run time of one task, and a missed tick still to catch up."""

    def __init__(self, task, schedule, now, last_run_at, *, catch_up):
        self.task = task
        self.schedule = schedule
        # The latest tick known to be enqueued, by any scheduler.
        self.last_run_at = last_run_at
        self.start(now, catch_up=catch_up)

    def start(self, now, *, catch_up, missed_from=None):
        """Plan from ``now``: ticks before it are missed, the next one is due.

        Never plans a tick at or before the last one enqueued, so a restart or
        a clock that woke a little early cannot fire a tick twice (Solid Queue
        #615). With ``catch_up``, a run_latest task gets its latest missed
        tick: one after its last run, or from ``missed_from`` on if it has none.
        """
        after = max(now, self.last_run_at) if self.last_run_at else now
        self.next_run_at = self.schedule.next_after(after)
        self.catch_up_at = None
        if not catch_up or self.task.missed != "run_latest":
            return
        latest = self.schedule.latest_at_or_before(now)
        if self.last_run_at is not None:
            missed = latest > self.last_run_at
        else:
            # A task that never ran missed nothing, unless it was due.
            missed = missed_from is not None and latest >= missed_from
        if missed:
            self.catch_up_at = latest

    def next_due(self, now):
        """The run time to enqueue now, or None if no tick is due."""
        if self.catch_up_at is not None:
            return self.catch_up_at
        if self.next_run_at > now:
            return None
        if now - self.next_run_at > MAX_LATENESS:
            self.start(now, catch_up=True, missed_from=self.next_run_at)
            return self.catch_up_at
        return self.next_run_at

    def done(self, run_at):
        """Move past ``run_at``, enqueued here or by another scheduler."""
        if self.last_run_at is None or run_at > self.last_run_at:
            self.last_run_at = run_at
        if run_at == self.catch_up_at:
            self.catch_up_at = None
        else:
            self.next_run_at = self.schedule.next_after(run_at)

    def seconds_until_due(self, now):
        if self.catch_up_at is not None:
            return 0.0
        return max(0.0, (self.next_run_at - now).total_seconds())

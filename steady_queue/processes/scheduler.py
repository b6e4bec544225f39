"""Scheduler: enqueues every tick of the recurring tasks, once across schedulers."""

import logging
import time
from datetime import timedelta

from django.db import DatabaseError

from .. import signals
from ..models import RecurringExecution, RecurringTask
from ..schedules.plan import TaskPlan
from ..schedules.schedule import ScheduleError
from ..schedules.specs import static_specs
from ..schedules.validation import problems
from .database_clock import DatabaseClock
from .hooks import send_hook
from .poller import Poller

logger = logging.getLogger("steady_queue")

# Old ticks are deleted this often, once older than clear_finished_jobs_after
# but never younger than MIN_TICK_AGE; each task keeps its latest.
CLEANUP_INTERVAL = 3600.0
MIN_TICK_AGE = 3600.0
# The longest sleep: a database clock that jumped is noticed within this.
MAX_SLEEP = 60.0
# Wake this long after a tick is due rather than a hair before it.
WAKE_SLACK = 0.001


class Scheduler(Poller):
    """Enqueues due ticks; with dynamic tasks, rereads the task table each poll.

    Ticks are timed by the database server's clock, read once per poll: hosts
    whose clocks disagree still agree on which tick is due, and none enqueues
    a tick before its time.
    """

    kind = "scheduler"

    def __init__(self, backend, config, **kwargs):
        self.config = config
        super().__init__(backend, **kwargs)
        self.polling_interval = config.polling_interval
        self.plans = {}
        # Keys whose schedule cannot be read, so each is logged once.
        self.unreadable = {}
        self.loaded = False
        # Polls that ran to the end: each saw every tick due when it began.
        self.rounds = 0
        self.next_reload = self.next_cleanup = 0.0
        self.clock = DatabaseClock(RecurringExecution.objects.using(self.database))

    def metadata(self):
        return {
            "polling_interval": self.config.polling_interval,
            "dynamic_tasks": self.config.dynamic_tasks,
        }

    def poll(self):
        self.clock.sync()
        if not self.loaded:
            self.store_static_tasks()
        if time.monotonic() >= self.next_reload:
            # Ticks missed while no scheduler ran are judged once, at start.
            self.load_tasks(catch_up=not self.loaded)
            self.loaded = True
        self.enqueue_due_ticks()
        if time.monotonic() >= self.next_cleanup:
            self.clear_old_ticks()
        self.rounds += 1
        return self.time_to_next_duty()

    def store_static_tasks(self):
        """Upsert the tasks declared in code and settings; drop stale ones."""
        valid = {}
        for spec in static_specs(self.options):
            found = problems(spec)
            if found or spec.key in valid:
                # manage.py check reports these; the other tasks still run.
                logger.error(
                    "%s: not scheduling %s: %s",
                    self.description,
                    spec.describe(),
                    "; ".join(m for _, m, _ in found) or "its key is used twice",
                )
                continue
            valid[spec.key] = spec
        tasks = RecurringTask.objects.using(self.database)
        tasks.sync_static(self.backend.alias, list(valid.values()))

    def load_tasks(self, *, catch_up, now=None):
        """Read the task table; plan new and re-timed tasks, drop removed ones.

        Ticks are planned from ``now`` (default: the database's time) on.
        """
        rows = list(
            RecurringTask.objects.using(self.database).for_scheduler(
                self.backend.alias, dynamic=self.config.dynamic_tasks
            )
        )
        unchanged = {
            row.key
            for row in rows
            if row.key in self.plans and self.plans[row.key].task.timing == row.timing
        }
        replanned = [row.key for row in rows if row.key not in unchanged]
        last_run_times = (
            RecurringExecution.objects.using(self.database).last_run_times(replanned)
            if replanned
            else {}
        )
        now = now or self.clock.now()
        plans = {}
        for row in rows:
            if row.key in unchanged:
                # Arguments, queue or priority may have changed: use them.
                plans[row.key] = self.plans[row.key]
                plans[row.key].task = row
                continue
            schedule = self.schedule_of(row)
            if schedule is not None:
                last = last_run_times.get(row.key)
                plans[row.key] = TaskPlan(row, schedule, now, last, catch_up=catch_up)
        self.plans = plans
        self.next_reload = time.monotonic() + (
            self.polling_interval if self.config.dynamic_tasks else float("inf")
        )

    def schedule_of(self, row):
        try:
            schedule = row.parsed_schedule
        except ScheduleError as error:
            if self.unreadable.get(row.key) != row.schedule:
                self.unreadable[row.key] = row.schedule
                logger.error(
                    "%s: not scheduling %r: %s", self.description, row.key, error
                )
            return None
        self.unreadable.pop(row.key, None)
        return schedule

    def enqueue_due_ticks(self, now=None):
        """Enqueue every tick due at ``now`` (default: the database's time);
        return the TaskResults of the jobs this scheduler enqueued."""
        now = now or self.clock.now()
        enqueued = []
        for plan in list(self.plans.values()):
            while not self.stopping and (run_at := plan.next_due(now)) is not None:
                result = self.enqueue_tick(plan, run_at)
                if result is not None:
                    enqueued.append(result)
                plan.done(run_at)
        return enqueued

    def enqueue_tick(self, plan, run_at):
        """Enqueue one tick unless another scheduler did; log a task that fails.

        Return the job's TaskResult, or None.
        """
        try:
            result = plan.task.enqueue_tick(run_at)
        except DatabaseError:
            # The guard backs off; the tick stays due and is tried again.
            raise
        except Exception as error:
            # A task that no longer imports or rejects its arguments: skip
            # this tick, keep the schedule and the other tasks going.
            logger.error(
                "%s: recurring task %r could not be enqueued for %s: %s: %s",
                self.description,
                plan.task.key,
                run_at.isoformat(),
                type(error).__name__,
                error,
            )
            return None
        if result is not None:
            send_hook(
                signals.recurring_task_enqueued,
                type(self),
                key=plan.task.key,
                run_at=run_at,
                task_result=result,
            )
        return result

    def clear_old_ticks(self):
        age = max(self.options.clear_finished_jobs_after, MIN_TICK_AGE)
        cutoff = self.clock.now() - timedelta(seconds=age)
        RecurringExecution.objects.using(self.database).clear_before(cutoff)
        self.next_cleanup = time.monotonic() + CLEANUP_INTERVAL

    def time_to_next_duty(self):
        """Seconds until a tick is due, the table is reread, or ticks are cleared."""
        now, monotonic = self.clock.now(), time.monotonic()
        waits = [plan.seconds_until_due(now) for plan in self.plans.values()]
        waits += [self.next_reload - monotonic, self.next_cleanup - monotonic]
        return max(0.0, min(MAX_SLEEP, *waits)) + WAKE_SLACK

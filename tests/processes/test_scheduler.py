"""Scheduler, in-process: poll() enqueues each due tick once, on a test's clock.

The scheduler reads the time through its DatabaseClock; most tests replace
that with a Clock they move by hand, so a tick comes due exactly when a test
says, and two schedulers can be interleaved poll by poll.
"""

import copy
import logging
from datetime import timedelta
from itertools import pairwise

import pytest
from django.utils import timezone

from steady_queue import signals
from steady_queue.compat import task_backends
from steady_queue.models import Job, RecurringExecution, RecurringTask
from steady_queue.processes import scheduler as scheduler_module
from steady_queue.processes.scheduler import MAX_SLEEP, WAKE_SLACK, Scheduler
from steady_queue.schedules import specs

from ..helpers import scaled, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

EVERY_SECOND = {"task": "tests.tasks.add", "schedule": "every second", "args": [2, 3]}


class Clock:
    """A wall clock that moves only when told to."""

    def __init__(self, moment):
        self.moment = moment

    def sync(self):
        pass

    def now(self):
        return self.moment

    def advance(self, **delta):
        self.moment += timedelta(**delta)


@pytest.fixture
def clock(monkeypatch):
    # On a whole second, so "every second" ticks fall on clock.advance(seconds=n).
    clock = Clock(timezone.now().replace(microsecond=0))
    monkeypatch.setattr(scheduler_module, "DatabaseClock", lambda queryset: clock)
    return clock


@pytest.fixture(autouse=True)
def no_declared_tasks(monkeypatch):
    """Only the tasks a test configures: no @recurring from imported modules."""
    monkeypatch.setattr(specs, "_declared", [])


@pytest.fixture
def make_scheduler(settings):
    """Build schedulers for these recurring entries and scheduler options."""
    made = []

    def make(recurring, **options):
        configured = copy.deepcopy(settings.TASKS)
        configured["default"]["OPTIONS"]["recurring"] = recurring
        configured["default"]["OPTIONS"]["scheduler"] = {
            "polling_interval": 0.1,
            **options,
        }
        if settings.TASKS != configured:
            settings.TASKS = configured
        backend = task_backends["default"]
        scheduler = Scheduler(
            backend, backend.config.scheduler, name=f"scheduler-unit-{len(made)}"
        )
        made.append(scheduler)
        return scheduler

    yield make
    for scheduler in made:
        scheduler.close_wake_pipe()


@pytest.fixture
def enqueued_signals():
    """The run times each recurring_task_enqueued signal was sent for."""
    seen = []

    def receiver(sender, key, run_at, task_result, **kwargs):
        seen.append((key, run_at))

    signals.recurring_task_enqueued.connect(receiver)
    yield seen
    signals.recurring_task_enqueued.disconnect(receiver)


def run_times(key="tick"):
    ticks = RecurringExecution.objects.filter(task_key=key).order_by("run_at")
    return list(ticks.values_list("run_at", flat=True))


def test_a_tick_is_enqueued_by_the_poll_that_finds_it_due_and_only_once(
    clock, make_scheduler
):
    scheduler = make_scheduler({"tick": EVERY_SECOND})
    scheduler.poll()
    assert run_times() == []

    clock.advance(seconds=1)
    scheduler.poll()
    scheduler.poll()

    assert run_times() == [clock.now()]
    tick = RecurringExecution.objects.get()
    job = Job.objects.get()
    assert tick.job_id == job.pk
    assert job.task_path == "tests.tasks.add"
    assert job.arguments["args"] == [2, 3]
    assert job.scheduled_at == clock.now()


def test_every_tick_that_came_due_between_polls_is_enqueued_in_order(
    clock, make_scheduler, enqueued_signals
):
    scheduler = make_scheduler({"tick": EVERY_SECOND})
    start = clock.now()
    scheduler.poll()

    clock.advance(seconds=3)
    scheduler.poll()

    expected = [start + timedelta(seconds=n) for n in (1, 2, 3)]
    assert run_times() == expected
    assert Job.objects.count() == 3
    assert enqueued_signals == [("tick", run_at) for run_at in expected]


def test_two_schedulers_racing_for_each_tick_enqueue_it_once(
    clock, make_scheduler, enqueued_signals
):
    first = make_scheduler({"tick": EVERY_SECOND})
    second = make_scheduler({"tick": EVERY_SECOND})
    first.poll()
    second.poll()
    start = clock.now()

    clock.advance(seconds=1)
    first.poll()
    second.poll()
    clock.advance(seconds=1)
    second.poll()
    first.poll()

    expected = [start + timedelta(seconds=n) for n in (1, 2)]
    assert run_times() == expected
    assert Job.objects.count() == 2
    # The loser of each race enqueued nothing and said nothing; both moved on.
    assert enqueued_signals == [("tick", run_at) for run_at in expected]
    assert first.plans["tick"].last_run_at == second.plans["tick"].last_run_at
    assert first.plans["tick"].last_run_at == expected[-1]


def test_a_stalled_scheduler_skips_the_ticks_it_missed(clock, make_scheduler):
    scheduler = make_scheduler({"tick": {**EVERY_SECOND, "missed": "skip"}})
    scheduler.poll()

    clock.advance(minutes=5)
    scheduler.poll()
    assert run_times() == []

    clock.advance(seconds=1)
    scheduler.poll()
    assert run_times() == [clock.now()]


def test_a_stalled_scheduler_runs_only_the_latest_missed_tick_with_run_latest(
    clock, make_scheduler
):
    scheduler = make_scheduler({"tick": {**EVERY_SECOND, "missed": "run_latest"}})
    scheduler.poll()

    clock.advance(minutes=5)
    scheduler.poll()
    scheduler.poll()

    assert run_times() == [clock.now()]
    assert Job.objects.count() == 1


def test_a_poll_sleeps_until_the_next_tick_or_at_most_a_minute(clock, make_scheduler):
    scheduler = make_scheduler({"tick": EVERY_SECOND})
    clock.advance(milliseconds=250)

    assert scheduler.poll() == pytest.approx(0.75 + WAKE_SLACK)

    # Half a minute past the hour: the next hourly tick is an hour away, not
    # the few seconds it would be if the real clock were just before the hour.
    clock.moment = clock.moment.replace(minute=0, second=30)
    idle = make_scheduler({"hourly": {**EVERY_SECOND, "schedule": "every hour"}})
    assert idle.poll() == pytest.approx(MAX_SLEEP + WAKE_SLACK)


def test_the_first_poll_clears_old_ticks_but_keeps_each_tasks_latest(
    clock, make_scheduler
):
    long_ago = clock.now() - timedelta(days=3)
    for hours in range(3):
        RecurringExecution.objects.create(
            task_key="tick", run_at=long_ago + timedelta(hours=hours)
        )
    RecurringExecution.objects.create(task_key="gone", run_at=long_ago)
    scheduler = make_scheduler({"tick": EVERY_SECOND})

    scheduler.poll()

    assert sorted(RecurringExecution.objects.values_list("task_key", "run_at")) == [
        ("gone", long_ago),
        ("tick", long_ago + timedelta(hours=2)),
    ]


def test_an_unreadable_dynamic_schedule_is_logged_once_and_the_rest_still_run(
    clock, make_scheduler, caplog
):
    RecurringTask.objects.create(
        key="broken",
        schedule="every blue moon",
        task_path="tests.tasks.noop",
        static=False,
    )
    scheduler = make_scheduler({"tick": EVERY_SECOND}, dynamic_tasks=True)

    with caplog.at_level(logging.ERROR, logger="steady_queue"):
        scheduler.poll()
        scheduler.next_reload = 0.0  # as if its polling interval had passed
        clock.advance(seconds=1)
        scheduler.poll()

    assert caplog.text.count("not scheduling 'broken'") == 1
    assert set(scheduler.plans) == {"tick"}
    assert run_times() == [clock.now()]
    assert run_times("broken") == []


def test_a_dynamic_task_added_while_running_is_planned_at_the_next_reload(
    clock, make_scheduler
):
    scheduler = make_scheduler({"tick": EVERY_SECOND}, dynamic_tasks=True)
    scheduler.poll()
    RecurringTask.objects.create(
        key="added",
        schedule="every second",
        task_path="tests.tasks.noop",
        static=False,
    )

    scheduler.next_reload = 0.0  # as if its polling interval had passed
    clock.advance(seconds=1)
    scheduler.poll()
    # Planned from now on: a new task waits for its first tick.
    assert "added" in scheduler.plans
    assert run_times("added") == []

    clock.advance(seconds=1)
    scheduler.poll()
    assert run_times("added") == [clock.now()]
    assert len(run_times("tick")) == 2


def test_without_dynamic_tasks_the_table_is_read_once(clock, make_scheduler):
    scheduler = make_scheduler({"tick": EVERY_SECOND})
    scheduler.poll()

    assert scheduler.next_reload == float("inf")
    assert list(RecurringTask.objects.values_list("key", "static")) == [("tick", True)]


@pytest.mark.parametrize("skew", [30, -30], ids=["host ahead", "host behind"])
def test_ticks_follow_the_database_clock_whatever_the_hosts_clock(
    skew, monkeypatch, make_scheduler
):
    # Python's clock is off by ``skew``, as a host's would be; the database's
    # is not (SQLite reads the clock itself, not through Python).
    host_now = timezone.now
    monkeypatch.setattr(timezone, "now", lambda: host_now() + timedelta(seconds=skew))
    scheduler = make_scheduler({"tick": EVERY_SECOND})
    ticks = RecurringExecution.objects

    wait_for(
        lambda: scheduler.poll() is not None and ticks.count() >= 2,
        timeout=10,
        interval=0.05,
        message="two ticks enqueued",
    )

    database_now = ticks.database_now()
    # Each tick was enqueued once it was due by the database's clock, and in
    # step with it: not half a minute early, nor half a minute late.
    for run_at in run_times():
        assert run_at <= database_now
        assert database_now - run_at < timedelta(seconds=scaled(5))
    assert {b - a for a, b in pairwise(run_times())} == {timedelta(seconds=1)}

"""Ticks missed while no scheduler ran: skip them, or run the latest once."""

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from steady_queue.models import Job, RecurringExecution

pytestmark = pytest.mark.django_db(transaction=True)

HOURLY = "every hour"


def hour_start(moment):
    return moment.replace(minute=0, second=0, microsecond=0)


def ran_at(key, run_at):
    RecurringExecution.objects.create(task_key=key, run_at=run_at)


def declare(configure, missed):
    configure(
        {"report": {"task": "tests.tasks.noop", "schedule": HOURLY, "missed": missed}}
    )


def test_run_latest_enqueues_the_latest_missed_tick_once_at_start(
    configure, run_scheduler
):
    declare(configure, "run_latest")
    before = timezone.now()
    ran_at("report", hour_start(before) - timedelta(hours=3))

    # The first poll enqueues what was due when it began.
    first = run_scheduler()
    latest = first.plans["report"].schedule.latest_at_or_before(timezone.now())
    assert hour_start(before) <= latest
    caught_up = RecurringExecution.objects.get(task_key="report", run_at=latest)
    assert Job.objects.filter(pk=caught_up.job_id).exists()

    # A second scheduler starting now finds the latest tick done.
    run_scheduler()
    assert RecurringExecution.objects.filter(task_key="report").count() == 2
    assert Job.objects.count() == 1


def test_skip_leaves_missed_ticks_alone(configure, run_scheduler):
    declare(configure, "skip")
    ran_at("report", hour_start(timezone.now()) - timedelta(hours=3))

    scheduler = run_scheduler()
    assert scheduler.plans["report"].next_run_at > timezone.now()
    assert RecurringExecution.objects.count() == 1
    assert not Job.objects.exists()


def test_run_latest_does_not_run_a_task_that_never_ran(configure, run_scheduler):
    declare(configure, "run_latest")
    run_scheduler()
    assert not RecurringExecution.objects.exists()
    assert not Job.objects.exists()


def test_old_ticks_are_cleared_but_each_tasks_latest_stays(configure):
    old = datetime(2020, 1, 1, tzinfo=UTC)
    for hours in range(5):
        ran_at("report", old + timedelta(hours=hours))
    ran_at("other", old)
    recent = timezone.now().replace(microsecond=0)
    ran_at("report", recent)

    deleted = RecurringExecution.objects.clear_before(recent - timedelta(days=1))

    assert deleted == 5
    assert sorted(RecurringExecution.objects.values_list("task_key", "run_at")) == [
        ("other", old),
        ("report", recent),
    ]

"""Dynamic tasks: added, changed and removed while a scheduler runs; run_now."""

from datetime import timedelta

import pytest
from django.utils import timezone

from steady_queue.exceptions import RecurringTaskError, RecurringTaskNotFound
from steady_queue.models import Job, RecurringExecution, RecurringTask
from steady_queue.recurring import (
    run_now,
    schedule_recurring_task,
    unschedule_recurring_task,
)

from .. import tasks
from ..helpers import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def jobs_for(key):
    job_ids = RecurringExecution.objects.filter(task_key=key).values("job_id")
    return Job.objects.filter(pk__in=job_ids).order_by("pk")


def test_a_dynamic_task_is_picked_up_changed_and_removed_without_restart(
    configure, run_scheduler
):
    configure(dynamic_tasks=True)
    scheduler = run_scheduler()

    schedule_recurring_task("sum", task=tasks.add, schedule="every second", args=[1, 2])
    wait_for(lambda: jobs_for("sum").count() >= 2, timeout=20, message="two jobs")
    assert jobs_for("sum").first().arguments == {"args": [1, 2], "kwargs": {}}

    # New arguments reach the next tick (Solid Queue #738 needed a restart).
    schedule_recurring_task(
        "sum", task=tasks.add, schedule="every second", kwargs={"a": 5, "b": 6}
    )
    wait_for(
        lambda: (
            jobs_for("sum").last().arguments == {"args": [], "kwargs": {"a": 5, "b": 6}}
        ),
        timeout=20,
        message="a job with the new arguments",
    )

    # A new schedule: from the next reload on, ticks fall on even seconds only.
    schedule_recurring_task(
        "sum", task=tasks.add, schedule="*/2 * * * * *", args=[1, 1]
    )
    changed_at = timezone.now()
    wait_for(
        lambda: (
            RecurringExecution.objects.filter(
                task_key="sum", run_at__gt=changed_at + timedelta(seconds=1)
            ).count()
            >= 2
        ),
        timeout=20,
        message="two ticks on the new schedule",
    )
    later = RecurringExecution.objects.filter(
        task_key="sum", run_at__gt=changed_at + timedelta(seconds=1)
    )
    assert {execution.run_at.second % 2 for execution in later} == {0}

    unschedule_recurring_task("sum")
    wait_for(lambda: "sum" not in scheduler.plans, timeout=20, message="task dropped")
    count = RecurringExecution.objects.filter(task_key="sum").count()
    # It keeps polling (every 0.1 s) past two more would-be ticks, adding none.
    rounds = scheduler.rounds
    wait_for(lambda: scheduler.rounds >= rounds + 25, timeout=20)
    assert RecurringExecution.objects.filter(task_key="sum").count() == count
    assert not RecurringTask.objects.filter(key="sum").exists()


def test_dynamic_tasks_are_refused_when_switched_off(configure):
    configure()
    with pytest.raises(RecurringTaskError, match="dynamic_tasks'\\] = True"):
        schedule_recurring_task("sum", task=tasks.add, schedule="every hour")


def test_a_bad_dynamic_task_is_refused_with_every_problem(configure):
    configure(dynamic_tasks=True)
    with pytest.raises(RecurringTaskError) as caught:
        schedule_recurring_task(
            "bad",
            task="tests.tasks.nothing",
            schedule="every 7 seconds",
            timezone="Nowhere/Special",
            missed="sometimes",
        )
    message = str(caught.value)
    assert "the time zone 'Nowhere/Special' is unknown" in message
    assert "missed='sometimes'" in message
    assert "'tests.tasks.nothing', which cannot be imported" in message
    assert not RecurringTask.objects.exists()


def test_static_tasks_cannot_be_replaced_or_unscheduled_at_runtime(configure):
    configure(dynamic_tasks=True)
    RecurringTask.objects.create(key="static", schedule="@hourly", task_path="x.y")
    with pytest.raises(RecurringTaskError, match="belongs to a static"):
        schedule_recurring_task("static", task=tasks.noop, schedule="every hour")
    with pytest.raises(RecurringTaskError, match="is a static recurring task"):
        unschedule_recurring_task("static")
    with pytest.raises(RecurringTaskNotFound, match="'missing'"):
        unschedule_recurring_task("missing")


def test_run_now_enqueues_one_job_that_is_not_a_tick(configure):
    configure(
        {"sum": {"task": "tests.tasks.add", "schedule": "@yearly", "args": [2, 3]}}
    )
    # Before any scheduler stored it, the declaration is used.
    result = run_now("sum")
    assert Job.objects.get(pk=result.id).arguments == {"args": [2, 3], "kwargs": {}}
    assert not RecurringExecution.objects.exists()

    configure(dynamic_tasks=True)
    schedule_recurring_task(
        "urgent", task=tasks.urgent, schedule="@yearly", args=["now"], priority=20
    )
    job = Job.objects.get(pk=run_now("urgent").id)
    assert (job.queue_name, job.priority, job.args) == ("high", 20, ["now"])
    assert not RecurringExecution.objects.exists()
    with pytest.raises(RecurringTaskNotFound):
        run_now("nothing")

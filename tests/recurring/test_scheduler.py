"""The Scheduler process: each tick enqueued once, on time, by any number of them."""

from datetime import timedelta
from itertools import pairwise

import pytest
from django.utils import timezone

from steady_queue.models import Job, RecurringExecution, RecurringTask

from ..helpers import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

EVERY_SECOND = {"tick": {"task": "tests.tasks.noop", "schedule": "every second"}}


def ticks(key="tick"):
    return list(RecurringExecution.objects.filter(task_key=key).order_by("run_at"))


def assert_one_job_per_consecutive_second(executions):
    run_times = [execution.run_at for execution in executions]
    gaps = {later - earlier for earlier, later in pairwise(run_times)}
    assert gaps == {timedelta(seconds=1)}, run_times
    assert all(run_at.microsecond == 0 for run_at in run_times)
    job_ids = [execution.job_id for execution in executions]
    assert None not in job_ids
    jobs = Job.objects.filter(pk__in=job_ids)
    assert jobs.count() == len(executions)
    assert {job.task_path for job in jobs} == {"tests.tasks.noop"}
    # Nothing else was enqueued: no job without its tick, no tick twice.
    assert Job.objects.count() == len(executions)


def test_every_second_enqueues_one_job_per_second(configure, run_scheduler):
    configure(EVERY_SECOND)
    scheduler = run_scheduler()
    wait_for(lambda: len(ticks()) >= 4, timeout=20, message="four ticks")
    scheduler.stop()

    executions = ticks()
    assert_one_job_per_consecutive_second(executions)
    # The job records the tick it is for, and was enqueued when it came.
    for execution in executions:
        job = Job.objects.get(pk=execution.job_id)
        assert job.scheduled_at == execution.run_at
        assert timedelta(0) <= job.enqueued_at - execution.run_at < timedelta(seconds=1)


def test_two_schedulers_enqueue_each_tick_once(configure, run_scheduler):
    configure(EVERY_SECOND)
    first, second = run_scheduler(), run_scheduler()
    wait_for(lambda: len(ticks()) >= 4, timeout=20, message="four ticks")
    first.stop()
    second.stop()

    executions = ticks()
    assert_one_job_per_consecutive_second(executions)
    # Both went through the ticks: each one raced for them, one won.
    covered = executions[-2].run_at
    assert first.plans["tick"].last_run_at >= covered
    assert second.plans["tick"].last_run_at >= covered


def test_static_tasks_are_stored_and_stale_ones_removed(configure, run_scheduler):
    RecurringTask.objects.create(key="gone", schedule="every hour", task_path="x.y")
    RecurringTask.objects.create(
        key="dynamic", schedule="every hour", task_path="x.y", static=False
    )
    configure(
        {
            "report": {
                "task": "tests.tasks.add",
                "schedule": "every day at 9am",
                "args": [1, 2],
                "queue_name": "reports",
                "priority": 5,
                "timezone": "Europe/Paris",
                "description": "Daily numbers",
                "missed": "run_latest",
            }
        }
    )
    run_scheduler()

    assert set(RecurringTask.objects.values_list("key", flat=True)) == {
        "report",
        "dynamic",
    }
    report = RecurringTask.objects.get(key="report")
    assert (report.static, report.backend_name) == (True, "default")
    assert report.arguments == {"args": [1, 2], "kwargs": {}}
    assert (report.queue_name, report.priority) == ("reports", 5)
    assert (report.timezone, report.missed) == ("Europe/Paris", "run_latest")


def test_a_tick_another_scheduler_recorded_is_not_enqueued_again(configure):
    configure(EVERY_SECOND)
    task = RecurringTask.objects.create(
        key="tick", schedule="every second", task_path="tests.tasks.noop"
    )
    run_at = timezone.now().replace(microsecond=0)

    assert task.enqueue_tick(run_at) is not None
    assert task.enqueue_tick(run_at) is None
    assert Job.objects.count() == 1
    assert RecurringExecution.objects.get().job_id == Job.objects.get().pk


def test_a_task_that_cannot_be_enqueued_is_logged_and_skipped(
    configure, run_scheduler, caplog
):
    configure(EVERY_SECOND)
    RecurringTask.objects.create(
        key="broken",
        schedule="every second",
        task_path="tests.tasks.no_such_task",
        static=False,
    )
    configure(EVERY_SECOND, dynamic_tasks=True)
    run_scheduler()
    wait_for(lambda: len(ticks()) >= 2, timeout=20, message="two ticks")

    assert not ticks("broken")
    assert "recurring task 'broken' could not be enqueued" in caplog.text

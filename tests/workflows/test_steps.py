"""Durable steps: run once per job, stored as they return, replayed after."""

import pytest

from steady_queue import step
from steady_queue.compat import TaskResultStatus
from steady_queue.exceptions import StepError
from steady_queue.models import Job, Step
from steady_queue.testing import run_pending

from .. import workflow_tasks as tasks

pytestmark = pytest.mark.django_db


def last_error(result):
    job = Job.objects.get(pk=result.id)
    return job.errors[-1]["traceback"]


def test_a_step_runs_once_and_stores_its_value():
    result = tasks.two_steps.enqueue("a")
    run_pending()

    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == {"first": {"n": 1}, "second": 3.0}
    stored = Step.objects.of_job(result.id)
    assert [(s.name, s.kind) for s in stored] == [
        ("first", "step"),
        ("second", "step"),
    ]
    assert all(s.finished_at is not None for s in stored)
    assert tasks.CALLS == {"a:first": 1, "a:second": 1}


def test_a_retried_job_replays_its_finished_steps_without_running_them():
    result = tasks.fails_after_a_step.enqueue("r")
    run_pending(run_scheduled=True)

    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == "ch_1"
    # The run failed after the step returned; the retry replayed it.
    assert tasks.CALLS["r:charge"] == 1
    assert tasks.CALLS["r:body"] == 2


def test_a_step_that_raises_is_not_stored_and_runs_again_with_the_retry():
    result = tasks.step_fails_once.enqueue("f")
    run_pending(run_scheduled=True)

    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert tasks.CALLS["f:flaky"] == 2
    assert Step.objects.of_job(result.id).count() == 1


def test_a_name_used_twice_in_one_run_is_an_error():
    result = tasks.reuses_a_name.enqueue("twice")
    run_pending()

    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert "StepError" in last_error(result)
    assert "used twice" in last_error(result)
    assert tasks.CALLS == {"twice:1": 1}


def test_a_step_inside_the_tasks_own_atomic_block_is_refused_before_it_runs():
    result = tasks.step_in_atomic.enqueue("atomic")
    run_pending()

    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert "inside transaction.atomic()" in last_error(result)
    assert tasks.CALLS == {}


def test_a_step_whose_value_cannot_be_stored_fails_the_job_for_good():
    result = tasks.returns_unstorable_step.enqueue("bad")
    run_pending(run_scheduled=True)

    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert "The step 'bad'" in last_error(result)
    assert tasks.CALLS == {"bad": 1}


def test_step_outside_a_task_run_says_so():
    with pytest.raises(StepError, match="outside a task run"):
        step("x", tasks.effect, "x")


def test_steps_go_when_their_job_is_cleared():
    from django.utils import timezone

    result = tasks.two_steps.enqueue("gone")
    run_pending()
    assert Step.objects.of_job(result.id).count() == 2

    Job.objects.clear_finished(timezone.now())
    assert not Job.objects.filter(pk=result.id).exists()
    assert Step.objects.of_job(result.id).count() == 0


def test_steps_go_with_a_job_deleted_as_it_succeeds(settings):
    options = {**settings.TASKS["default"]["OPTIONS"], "preserve_finished_jobs": False}
    settings.TASKS = {"default": {**settings.TASKS["default"], "OPTIONS": options}}
    result = tasks.two_steps.enqueue("not-kept")
    run_pending()

    assert not Job.objects.filter(pk=result.id).exists()
    assert not Step.objects.filter(job_id=result.id).exists()

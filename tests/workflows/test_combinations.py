"""Steps and waits with the other features: Snooze, an operator's retry of a
failed (or cancelled) job, @unique, batches, status and get_result()."""

import json
from io import StringIO

import pytest
from django.core.management import call_command

from steady_queue import batch, emit_event, get_batch
from steady_queue.compat import TaskResultStatus
from steady_queue.models import FailedExecution, Job, Step, Wait
from steady_queue.testing import run_pending

from .. import workflow_tasks as tasks
from .conftest import status_of

pytestmark = pytest.mark.django_db


def test_a_snoozed_job_replays_its_steps():
    result = tasks.snoozes_after_a_step.enqueue("zz")
    run_pending()

    assert status_of(result) == TaskResultStatus.SUCCESSFUL
    assert result.return_value == 42
    assert tasks.CALLS == {"zz:once": 1, "zz:body": 2}


def test_a_failed_job_retried_by_an_operator_replays_its_steps():
    # A cancelled job is failed the same way (JobCancelledError): retried,
    # it starts from the top and skips the steps it finished.
    result = tasks.fails_for_good_after_a_step.enqueue("op")
    run_pending()
    assert status_of(result) == TaskResultStatus.FAILED

    FailedExecution.objects.filter(job_id=result.id).retry_all()
    run_pending()
    assert status_of(result) == TaskResultStatus.SUCCESSFUL
    assert tasks.CALLS == {"op:kept": 1, "op:body": 2}


def test_a_waiting_job_reads_as_ready_and_status_counts_it():
    waiting = tasks.waits_for.enqueue("counted")
    tasks.sleeps.enqueue("napping", 3600)
    run_pending()

    assert tasks.waits_for.get_result(waiting.id).status == TaskResultStatus.READY
    out = StringIO()
    call_command("steady_queue", "status", "--json", stdout=out)
    status = json.loads(out.getvalue())
    assert status["waiting"] == {"event": 1, "sleep": 1}
    assert status["totals"]["scheduled"] == 2

    out = StringIO()
    call_command("steady_queue", "status", stdout=out)
    assert "Waiting (among the scheduled): 1 for events, 1 in durable sleeps" in (
        out.getvalue()
    )


def test_a_parked_unique_job_still_holds_its_key():
    # @unique keeps one pending run (ready, scheduled or blocked): a parked
    # job waits in the scheduled table, so the same key merges into it.
    first = tasks.unique_waiter.enqueue("u")
    run_pending()
    assert Wait.objects.filter(job_id=first.id).exists()

    second = tasks.unique_waiter.enqueue("u")
    assert second.id == first.id
    assert emit_event("u", "once") == 1
    run_pending()
    assert status_of(first) == TaskResultStatus.SUCCESSFUL

    third = tasks.unique_waiter.enqueue("u")
    assert third.id != first.id


def test_a_batch_with_a_waiting_job_ends_when_it_does():
    with batch(on_finish=tasks.batch_callback) as opened:
        tasks.waits_for.enqueue("batch-event")
        tasks.two_steps.enqueue("in-batch")
    run_pending()
    assert get_batch(opened.id).pending == 1
    assert "batch-callback" not in tasks.CALLS

    emit_event("batch-event", "done")
    run_pending()
    status = get_batch(opened.id)
    assert (status.pending, status.finished) == (0, 2)
    assert tasks.CALLS["batch-callback"] == 1


def test_clearing_keeps_the_steps_of_jobs_not_cleared():
    from django.utils import timezone

    waiting = tasks.waits_for.enqueue("kept")
    run_pending()
    Job.objects.clear_finished(timezone.now())
    assert Step.objects.of_job(waiting.id).count() == 1

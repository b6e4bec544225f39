"""ClaimedExecution: finalize exactly once, release, and fail with a process error."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import steady_queue
from steady_queue.exceptions import ProcessExitError, error_payload
from steady_queue.models import (
    Batch,
    ClaimedExecution,
    FailedExecution,
    Job,
    Process,
    ReadyExecution,
)
from steady_queue.processes.queue_selector import QueueSelector

from .. import tasks
from ..factories import jobs_of, registered_process, run_outcome

pytestmark = pytest.mark.django_db


def claimed_jobs(count, process_id=7):
    for index in range(count):
        tasks.add.enqueue(index, index)
    selector = QueueSelector(["*"], "default", pause_refresh=0)
    return jobs_of(
        ReadyExecution.objects.claim(selector, count, registered_process(process_id))
    )


def success(job, value=1):
    return run_outcome(
        job,
        worker_id="worker-test",
        finished_at=timezone.now(),
        succeeded=True,
        return_value=value,
    )


def test_finalize_records_success_and_removes_the_claim():
    (job,) = claimed_jobs(1)
    claimed_at = ClaimedExecution.objects.get(job=job).created_at
    recorded = ClaimedExecution.objects.finalize_all([success(job, 2)], 7)

    assert [o.job.pk for o in recorded] == [job.pk]
    row = Job.objects.get(pk=job.pk)
    assert row.return_value == 2
    assert row.worker_ids == ["worker-test"]
    assert row.finished_at is not None
    assert row.started_at == claimed_at
    assert not ClaimedExecution.objects.exists()


def test_finalize_skips_jobs_the_process_no_longer_holds():
    first, second = claimed_jobs(2)
    ClaimedExecution.objects.filter(job_id=first.pk).release_all()

    recorded = ClaimedExecution.objects.finalize_all(
        [success(first), success(second)], 7
    )

    assert [o.job.pk for o in recorded] == [second.pk]
    assert Job.objects.get(pk=first.pk).finished_at is None
    assert ReadyExecution.objects.filter(job_id=first.pk).exists()


def test_finalize_twice_records_once():
    (job,) = claimed_jobs(1)
    assert ClaimedExecution.objects.finalize_all([success(job)], 7)
    assert ClaimedExecution.objects.finalize_all([success(job)], 7) == []
    assert Job.objects.get(pk=job.pk).worker_ids == ["worker-test"]


def test_finalize_of_another_process_claim_is_ignored():
    (job,) = claimed_jobs(1, process_id=7)
    assert ClaimedExecution.objects.finalize_all([success(job)], 8) == []
    assert ClaimedExecution.objects.filter(job_id=job.pk, process_id=7).exists()


def test_failures_create_a_failed_execution_and_keep_the_error():
    (job,) = claimed_jobs(1)
    error = {"exception_class_path": "builtins.ValueError", "traceback": "ValueError\n"}
    outcome = run_outcome(
        job,
        worker_id="worker-test",
        finished_at=timezone.now(),
        succeeded=False,
        error=error,
    )
    ClaimedExecution.objects.finalize_all([outcome], 7)

    assert FailedExecution.objects.filter(job_id=job.pk).exists()
    (stored,) = Job.objects.get(pk=job.pk).errors
    assert without_times(stored) == error
    # The error keeps its attempt's times: the claim and the outcome's end.
    assert stored["finished_at"] == outcome.finished_at.isoformat()
    assert stored["started_at"] == outcome.claimed_at.isoformat()


def test_successful_jobs_are_deleted_when_not_preserved():
    (job,) = claimed_jobs(1)
    ClaimedExecution.objects.finalize_all(
        [success(job)], 7, preserve_finished_jobs=False
    )
    assert not Job.objects.filter(pk=job.pk).exists()


def test_release_puts_jobs_back_to_ready_with_their_queue_and_priority():
    job = tasks.urgent.enqueue("x")
    claimed_jobs(0)
    ReadyExecution.objects.claim(QueueSelector(["*"], "default"), 1, 7)

    assert ClaimedExecution.objects.held_by(7).release_all() == [int(job.id)]
    ready = ReadyExecution.objects.get()
    assert (ready.job_id, ready.queue_name, ready.priority) == (int(job.id), "high", 10)


def test_fail_all_with_fails_each_job_with_the_error_and_worker():
    jobs = claimed_jobs(3)
    error = error_payload(ProcessExitError, "worker-x (pid 1) was killed by SIGKILL")

    failed = ClaimedExecution.objects.fail_all_with(
        error, worker_ids_by_process={7: "worker-x"}
    )

    assert sorted(job.pk for job in failed) == sorted(job.pk for job in jobs)
    for job in Job.objects.filter(pk__in=[j.pk for j in jobs]):
        (stored,) = job.errors
        assert without_times(stored) == error
        assert {"started_at", "finished_at"} <= stored.keys()
        assert job.worker_ids == ["worker-x"]
        assert job.finished_at is not None
    assert FailedExecution.objects.count() == 3
    assert error["traceback"].startswith("steady_queue.exceptions.ProcessExitError: ")


def test_orphaned_claims_are_those_without_a_process_row():
    process = Process.objects.register(kind="worker", name="worker-alive")
    claimed_jobs(1, process_id=process.pk)
    claimed_jobs(1, process_id=process.pk + 1000)
    # Its process vanished without deregistering (the row removed by hand).
    Process.objects.filter(pk=process.pk + 1000).delete()

    orphaned = ClaimedExecution.objects.orphaned()
    assert [c.process_id for c in orphaned] == [process.pk + 1000]


def claimed_flaky(tmp_path, process_id=7):
    tasks.flaky.enqueue(str(tmp_path / "runs"), 5)
    selector = QueueSelector(["*"], "default", pause_refresh=0)
    return jobs_of(
        ReadyExecution.objects.claim(selector, 1, registered_process(process_id))
    )


def failure(job, error_class=ConnectionError):
    return run_outcome(
        job,
        worker_id="worker-test",
        finished_at=timezone.now(),
        succeeded=False,
        error=error_payload(error_class, "down"),
        exception=error_class("down"),
    )


def test_a_failure_with_attempts_left_is_scheduled_again(tmp_path):
    from steady_queue.compat import TaskResultStatus
    from steady_queue.models import ScheduledExecution

    (job,) = claimed_flaky(tmp_path)
    (recorded,) = ClaimedExecution.objects.finalize_all([failure(job)], 7)

    assert recorded.retry_at is not None
    scheduled = ScheduledExecution.objects.get(job_id=job.pk)
    assert scheduled.scheduled_at == recorded.retry_at
    # flaky waits 0.3 s between attempts.
    assert abs((recorded.retry_at - recorded.finished_at).total_seconds() - 0.3) < 0.01
    assert not FailedExecution.objects.exists()
    row = Job.objects.get(pk=job.pk)
    assert row.finished_at is None and row.scheduled_at is None
    result = tasks.flaky.get_result(job.pk)
    assert result.status == TaskResultStatus.READY
    assert result.attempts == 1
    assert [e.exception_class_path for e in result.errors] == [
        "builtins.ConnectionError"
    ]


def test_the_last_attempt_fails_for_good(tmp_path):
    (job,) = claimed_flaky(tmp_path)
    Job.objects.filter(pk=job.pk).update(
        errors=[
            error_payload(ConnectionError, "1"),
            error_payload(ConnectionError, "2"),
        ]
    )
    job.refresh_from_db()
    (recorded,) = ClaimedExecution.objects.finalize_all([failure(job)], 7)

    assert recorded.retry_at is None
    assert FailedExecution.objects.filter(job_id=job.pk).exists()
    assert len(Job.objects.get(pk=job.pk).errors) == 3


def test_a_killed_workers_job_is_retried_under_its_policy(tmp_path):
    from steady_queue.models import ScheduledExecution

    (job,) = claimed_flaky(tmp_path)
    ClaimedExecution.objects.all().fail_all_with(
        error_payload(ProcessExitError, "killed")
    )
    assert ScheduledExecution.objects.filter(job_id=job.pk).exists()
    assert not FailedExecution.objects.exists()


def batch_of(count):
    """A sealed batch of ``count`` add() jobs with an on_finish callback; its id."""
    with steady_queue.batch(on_finish=tasks.batch_callback) as opened:
        for index in range(count):
            tasks.add.enqueue(index, index)
    return opened.id


def test_finalize_counts_held_batch_jobs_and_ends_the_batch_it_completes():
    ending, running = batch_of(2), batch_of(2)
    selector = QueueSelector(["*"], "default", pause_refresh=0)
    claims = ReadyExecution.objects.claim(selector, 4, registered_process(7))
    jobs = sorted(jobs_of(claims), key=lambda job: job.pk)
    gone = jobs[-1]  # the running batch's second job, no longer held
    ClaimedExecution.objects.filter(job_id=gone.pk).release_all()

    recorded = ClaimedExecution.objects.finalize_all([success(j) for j in jobs], 7)

    assert [o.job.pk for o in recorded] == [j.pk for j in jobs[:-1]]
    counts = dict(Batch.objects.values_list("pk", "finished"))
    assert counts == {ending: 2, running: 1}
    assert Batch.objects.get(pk=ending).ended_at is not None
    assert Batch.objects.get(pk=running).ended_at is None
    [callback] = Job.objects.filter(task_path="tests.tasks.batch_callback")
    assert callback.arguments["kwargs"]["batch"]["id"] == ending


@pytest.mark.skipif(
    not connection.vendor == "postgresql",
    reason="finishes are one statement only where there are data-modifying CTEs",
)
def test_a_batch_jobs_finish_is_one_statement_on_postgresql():
    batch_of(2)
    (job, _) = jobs_of(
        ReadyExecution.objects.claim(
            QueueSelector(["*"], "default", pause_refresh=0), 2, registered_process(7)
        )
    )
    outcome = success(job)
    with CaptureQueriesContext(connection) as captured:
        ClaimedExecution.objects.finalize_all([outcome], 7)
    # The test's transaction makes the finish's own a savepoint.
    statements = [q["sql"] for q in captured if "SAVEPOINT" not in q["sql"]]
    assert len(statements) == 1, statements
    assert Batch.objects.get().finished == 1


def without_times(error):
    """A stored error without the attempt's times it keeps beside it."""
    return {k: v for k, v in error.items() if k not in ("started_at", "finished_at")}

"""A job row keeps its last worker names and its first and latest errors, with
counts of the rest: no column grows with every run."""

import pytest
from django.utils import timezone

from steady_queue.exceptions import error_payload
from steady_queue.models import ClaimedExecution, Job, ReadyExecution
from steady_queue.models.job.model import KEPT_ERRORS, KEPT_WORKER_IDS
from steady_queue.processes.queue_selector import QueueSelector

from .. import tasks
from ..factories import jobs_of, registered_process, run_outcome

pytestmark = pytest.mark.django_db(transaction=True)


def claimed_job_that_ran(runs, errors=0, process_id=7):
    """A claimed job whose row already lists ``runs`` workers and ``errors`` errors."""
    result = tasks.add.enqueue(1, 2)
    Job.objects.filter(pk=result.id).update(
        worker_ids=[f"worker-{n}" for n in range(runs)],
        errors=[error_payload(ValueError, f"failure {n}") for n in range(errors)],
    )
    selector = QueueSelector(["*"], "default", pause_refresh=0)
    (job,) = jobs_of(
        ReadyExecution.objects.claim(selector, 1, registered_process(process_id))
    )
    return job


def test_a_success_keeps_the_last_worker_names_and_counts_every_run():
    job = claimed_job_that_ran(KEPT_WORKER_IDS)
    outcome = run_outcome(
        job, worker_id="last", finished_at=timezone.now(), succeeded=True
    )
    ClaimedExecution.objects.finalize_all([outcome], 7)

    row = Job.objects.get(pk=job.pk)
    assert len(row.worker_ids) == KEPT_WORKER_IDS
    assert row.worker_ids[-1] == "last"
    assert row.worker_ids[0] == "worker-1"
    assert row.runs_dropped == 1
    assert tasks.add.get_result(str(job.pk)).attempts == KEPT_WORKER_IDS + 1


def test_a_failure_keeps_the_first_and_latest_errors_and_counts_the_rest():
    job = claimed_job_that_ran(KEPT_ERRORS, errors=KEPT_ERRORS)
    outcome = run_outcome(
        job,
        worker_id="last",
        finished_at=timezone.now(),
        succeeded=False,
        error=error_payload(RuntimeError, "the latest"),
    )
    ClaimedExecution.objects.finalize_all([outcome], 7)

    row = Job.objects.get(pk=job.pk)
    assert len(row.errors) == KEPT_ERRORS
    assert row.errors[0]["traceback"].endswith("failure 0\n")
    assert row.errors[1]["traceback"].endswith("failure 2\n")
    assert row.errors[-1]["traceback"].endswith("the latest\n")
    assert row.errors_dropped == 1
    assert row.error_count == KEPT_ERRORS + 1
    result = tasks.add.get_result(str(job.pk))
    assert result.attempts == KEPT_ERRORS + 1
    assert len(result.errors) == KEPT_ERRORS


def test_a_refreshed_result_counts_every_run():
    job = claimed_job_that_ran(KEPT_WORKER_IDS)
    result = tasks.add.get_result(str(job.pk))
    assert result.attempts == KEPT_WORKER_IDS + 1  # the run going on
    outcome = run_outcome(
        job, worker_id="last", finished_at=timezone.now(), succeeded=True
    )
    ClaimedExecution.objects.finalize_all([outcome], 7)

    result.refresh()
    assert result.attempts == KEPT_WORKER_IDS + 1
    assert result.return_value is None


def test_an_interrupted_run_handed_back_keeps_the_row_bounded():
    job = claimed_job_that_ran(KEPT_WORKER_IDS)
    ClaimedExecution.objects.filter(job_id=job.pk).release_all({7: "gone"})

    row = Job.objects.get(pk=job.pk)
    assert len(row.worker_ids) == KEPT_WORKER_IDS
    assert row.worker_ids[-1] == "gone"
    assert row.runs_dropped == 1
    assert row.attempts == KEPT_WORKER_IDS + 1


def test_a_process_failure_keeps_the_row_bounded():
    job = claimed_job_that_ran(KEPT_WORKER_IDS, errors=KEPT_ERRORS)
    ClaimedExecution.objects.filter(job_id=job.pk).fail_all_with(
        error_payload(RuntimeError, "the process died"), {7: "gone"}
    )

    row = Job.objects.get(pk=job.pk)
    assert (len(row.worker_ids), row.runs_dropped) == (KEPT_WORKER_IDS, 1)
    assert (len(row.errors), row.errors_dropped) == (KEPT_ERRORS, 1)

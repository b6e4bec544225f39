"""Worker, in-process: a job whose claim is taken away (cancelled) stops here.

An operator's cancel fails the job and deletes its claim in one transaction;
the worker notices the claim gone at its next check, cancels a coroutine, and
for a thread (which cannot be interrupted) asks to be replaced, or in thread
mode lets it run on, its result dropped. Never a success over the cancel.
"""

import logging

import pytest

from steady_queue.compat import TaskResultStatus
from steady_queue.models import ClaimedExecution, Job, ScheduledExecution

from .. import tasks
from ..helpers import wait_for
from .test_worker import error_of, job_ids, refreshed

pytestmark = pytest.mark.django_db(transaction=True)


def cancel(result, by="alice (admin)"):
    return ClaimedExecution.objects.filter(job_id=int(result.id)).cancel_all(by)


def lines(path):
    return path.read_text().split() if path.exists() else []


def assert_cancelled(result, by="alice (admin)"):
    (result,) = refreshed(result)
    assert result.status == TaskResultStatus.FAILED
    path, trace = error_of(result)
    assert path == "steady_queue.exceptions.JobCancelledError"
    assert f"Cancelled by {by} at " in trace
    # Final, although the task's policy retries up to three times.
    assert len(result.errors) == 1
    assert not ScheduledExecution.objects.filter(job_id=int(result.id)).exists()
    assert Job.objects.get(pk=int(result.id)).return_value is None


def test_a_cancelled_coroutine_is_cancelled_on_the_loop(make_worker, tmp_path, caplog):
    notes = tmp_path / "notes"
    result = tasks.async_runs_for.enqueue(str(notes), 30)
    worker = make_worker(real_pool=True, threads=2)
    worker.poll()
    wait_for(lambda: lines(notes) == ["started"], message="the coroutine to start")

    assert cancel(result) == [int(result.id)]
    worker.next_claim_check = 0
    with caplog.at_level(logging.WARNING, logger="steady_queue"):
        worker.poll()

    assert worker.in_flight == set()
    wait_for(lambda: lines(notes) == ["started", "cancelled"], message="cancelled")
    wait_for(lambda: worker.pool.is_idle, message="its slot to free up")
    assert f"job(s) {result.id} no longer held" in caplog.text
    assert "its coroutine cancelled" in caplog.text
    assert worker.recycler.reason is None
    worker.poll()
    assert_cancelled(result)


def test_a_cancelled_thread_in_thread_mode_runs_on_and_its_result_is_dropped(
    make_worker, tmp_path, caplog
):
    result = tasks.runs_for.enqueue(str(tmp_path / "notes"), 0)
    worker = make_worker(threads=2)
    worker.poll()
    assert worker.in_flight == job_ids(result)

    cancel(result)
    # The check is due again CLAIM_CHECK_INTERVAL after the last one.
    worker.next_claim_check = 0
    with caplog.at_level(logging.WARNING, logger="steady_queue"):
        worker.poll()

    assert worker.in_flight == set()
    assert "its result will be ignored" in caplog.text
    assert worker.recycler.reason is None
    # The thread returns a success after all: nothing records it.
    worker.pool.run_all()
    worker.poll()
    assert_cancelled(result)


def test_a_forked_worker_with_a_cancelled_thread_drains_for_shutdown_timeout(
    make_worker, tmp_path
):
    cancelled = tasks.runs_for.enqueue(str(tmp_path / "cancelled"), 0)
    other = tasks.add.enqueue(2, 3)
    worker = make_worker(threads=2)
    worker.owns_process = True
    worker.poll()

    cancel(cancelled)
    worker.next_claim_check = 0
    worker.poll()

    # Draining, for shutdown_timeout at most: its other job may finish.
    reason = f"job(s) {cancelled.id} cancelled while running"
    assert worker.recycler.reason == reason
    assert worker.in_flight == job_ids(other) and not worker.stopping
    worker.drain_until = 0  # as if shutdown_timeout had passed
    worker.poll()
    assert worker.stopping and worker.immediate
    assert worker.replacement_reason == reason
    assert_cancelled(cancelled)


def test_a_busy_worker_checks_its_claims_within_the_check_interval(make_worker):
    from steady_queue.processes.worker import CLAIM_CHECK_INTERVAL

    tasks.add.enqueue(1, 1)
    worker = make_worker(threads=1, polling_interval=5.0)
    # The pool is full after this poll: it would sleep FULL_POOL_WAIT.
    assert worker.poll() <= CLAIM_CHECK_INTERVAL
    assert worker.in_flight


def test_a_job_that_ended_before_the_cancel_is_left_as_it_ended(make_worker):
    result = tasks.add.enqueue(4, 4)
    worker = make_worker(threads=1)
    worker.poll()
    worker.pool.run_all()
    worker.poll()

    assert cancel(result) == []
    (result,) = refreshed(result)
    assert (result.status, result.return_value) == (TaskResultStatus.SUCCESSFUL, 8)

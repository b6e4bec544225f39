"""Batches in-process: counts, callbacks exactly once, and every way a job ends."""

from datetime import UTC, datetime

import pytest
from django.db import transaction

import steady_queue
from steady_queue.batches import BatchState
from steady_queue.exceptions import (
    BatchEndedError,
    BatchError,
    BatchNotFound,
    DuplicateTaskError,
)
from steady_queue.models import (
    Batch,
    FailedExecution,
    Job,
    ReadyExecution,
)

from .. import tasks
from ..processes.test_burst import burst

pytestmark = pytest.mark.django_db(transaction=True)

CALLBACK = "tests.tasks.batch_callback"
LATER = datetime(2100, 1, 1, tzinfo=UTC)


def callbacks_run():
    """The ``batch`` argument of every callback job, in enqueue order."""
    jobs = Job.objects.filter(task_path=CALLBACK).order_by("pk")
    return [job.arguments["kwargs"]["batch"] for job in jobs]


def events(runs):
    return sorted(run["event"] for run in runs)


def test_callbacks_are_enqueued_once_every_job_has_ended_with_the_counts():
    with steady_queue.batch(
        on_finish=tasks.batch_callback,
        on_success=tasks.batch_callback,
        on_failure=tasks.batch_callback,
        metadata={"report": "nightly"},
    ) as opened:
        for number in range(5):
            tasks.batch_member.enqueue(number, fails=number in (1, 3))

    status = steady_queue.get_batch(opened.id)
    assert (status.state, status.size, status.pending) == (BatchState.RUNNING, 5, 5)
    assert callbacks_run() == []

    burst().start()

    status = steady_queue.get_batch(opened.id)
    assert status.state == BatchState.FAILED
    assert (status.size, status.pending, status.finished, status.failed) == (
        5,
        0,
        3,
        2,
    )
    runs = callbacks_run()
    assert events(runs) == ["failure", "finish"]
    for run in runs:
        assert run["id"] == opened.id
        assert (run["size"], run["finished"], run["failed"], run["discarded"]) == (
            5,
            3,
            2,
            0,
        )
        assert run["metadata"] == {"report": "nightly"}
        assert run["state"] == "failed"
    # The callbacks ran too, and joined no batch.
    callback_jobs = Job.objects.filter(task_path=CALLBACK)
    assert set(callback_jobs.values_list("batch_id", flat=True)) == {None}
    assert all(job.finished_at for job in callback_jobs)
    assert set(status.callback_results) == {"finish", "failure"}


def test_a_batch_whose_jobs_all_finish_calls_on_success_not_on_failure():
    with steady_queue.batch(
        on_success=tasks.batch_callback, on_failure=tasks.other_batch_callback
    ) as opened:
        steady_queue.enqueue_many(tasks.batch_member, [((n,), {}) for n in range(20)])

    burst().start()

    status = steady_queue.get_batch(opened.id)
    assert (status.state, status.finished) == (BatchState.SUCCEEDED, 20)
    assert events(callbacks_run()) == ["success"]
    assert not Job.objects.filter(task_path="tests.tasks.other_batch_callback")


def test_an_empty_batch_ends_when_its_block_commits():
    with steady_queue.batch(on_finish=tasks.batch_callback) as opened:
        assert opened.status().state == BatchState.OPEN

    status = steady_queue.get_batch(opened.id)
    assert (status.state, status.size) == (BatchState.SUCCEEDED, 0)
    assert events(callbacks_run()) == ["finish"]


def test_a_batch_counts_its_jobs_once_when_its_block_ends():
    with steady_queue.batch(on_finish=tasks.batch_callback) as opened:
        tasks.batch_member.enqueue(1)
        steady_queue.enqueue_many(tasks.batch_member, [((2,), {}), ((3,), {})])
        # Added to its own batch in its own block: counted once, not twice.
        with steady_queue.add_to_batch(opened.id):
            tasks.batch_member.enqueue(4)
        assert (opened.status().state, opened.status().size) == (BatchState.OPEN, 4)
        assert Batch.objects.get(pk=opened.id).size == 1  # add_to_batch's

    status = steady_queue.get_batch(opened.id)
    assert (status.state, status.size, status.pending) == (BatchState.RUNNING, 4, 4)


def test_a_block_that_raises_writes_neither_the_batch_nor_its_jobs():
    with pytest.raises(RuntimeError):
        with steady_queue.batch(on_finish=tasks.batch_callback):
            tasks.batch_member.enqueue(1)
            raise RuntimeError("changed my mind")

    assert not Batch.objects.exists()
    assert not Job.objects.exists()


def test_a_batch_inside_the_callers_transaction_rolls_back_with_it():
    with pytest.raises(RuntimeError):
        with transaction.atomic():
            with steady_queue.batch(on_finish=tasks.batch_callback):
                tasks.batch_member.enqueue(1)
            raise RuntimeError("the caller's transaction fails")

    assert not Batch.objects.exists()
    assert not Job.objects.exists()


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"on_finish": tasks.add.func}, "on_finish must be a task"),
        (
            {"on_success": tasks.not_a_callback},
            "must take the keyword argument 'batch'",
        ),
        ({"metadata": {"when": object()}}, "metadata must hold only JSON values"),
        ({"metadata": ["a list"]}, "metadata must be a dict"),
        ({"metadata": {"ratio": float("nan")}}, "metadata must hold only JSON"),
        ({"metadata": {1: "int key"}}, "metadata must read back as it was"),
        (
            {"on_finish": tasks.batch_callback.using(run_after=LATER)},
            "has run_after set",
        ),
        (
            {"on_finish": tasks.batch_callback.using(backend="separate")},
            "does not keep its jobs in the batch's database",
        ),
    ],
)
def test_a_bad_batch_is_refused_before_anything_is_written(arguments, message):
    with pytest.raises(BatchError, match=message):
        with steady_queue.batch(**arguments):
            tasks.batch_member.enqueue(1)

    assert not Batch.objects.exists()
    assert not Job.objects.exists()


def test_jobs_are_added_to_a_batch_that_has_not_ended():
    with steady_queue.batch(on_finish=tasks.batch_callback) as opened:
        tasks.batch_member.enqueue(1)
    with steady_queue.add_to_batch(opened.id):
        tasks.batch_member.enqueue(2)
        tasks.batch_member.enqueue(3, fails=True)

    burst().start()

    status = steady_queue.get_batch(opened.id)
    assert (status.size, status.finished, status.failed) == (3, 2, 1)
    [run] = callbacks_run()
    assert (run["size"], run["finished"], run["failed"]) == (3, 2, 1)


def test_adding_to_an_ended_batch_is_refused_and_writes_nothing():
    with steady_queue.batch() as opened:
        tasks.batch_member.enqueue(1)
    burst().start()
    jobs = Job.objects.count()

    with pytest.raises(BatchEndedError, match=f"Batch {opened.id} has ended"):
        with steady_queue.add_to_batch(opened.id):
            tasks.batch_member.enqueue(2)

    assert Job.objects.count() == jobs
    assert steady_queue.get_batch(opened.id).size == 1


def test_an_unknown_batch_says_so():
    with pytest.raises(BatchNotFound, match="No batch with id 404"):
        steady_queue.get_batch(404)
    with pytest.raises(BatchNotFound, match="No batch with id 'nope'"):
        steady_queue.get_batch("nope")


def test_a_retried_job_counts_once_when_it_finally_ends(tmp_path):
    path = str(tmp_path / "attempts")
    with steady_queue.batch(on_finish=tasks.batch_callback) as opened:
        tasks.batch_member_retried.enqueue(path, 1)
        tasks.batch_member.enqueue(2)

    burst().start()

    status = steady_queue.get_batch(opened.id)
    assert (status.state, status.finished, status.failed) == (
        BatchState.SUCCEEDED,
        2,
        0,
    )
    assert len(callbacks_run()) == 1


def test_a_discarded_waiting_job_ends_the_batch_as_failed():
    with steady_queue.batch(on_failure=tasks.batch_callback) as opened:
        kept = tasks.batch_member.enqueue(1)
        dropped = tasks.batch_member.enqueue(2)
    ReadyExecution.objects.filter(job_id=dropped.id).discard_all()
    assert steady_queue.get_batch(opened.id).discarded == 1

    burst().start()

    status = steady_queue.get_batch(opened.id)
    assert (status.state, status.finished, status.discarded) == (
        BatchState.FAILED,
        1,
        1,
    )
    [run] = callbacks_run()
    assert run["discarded"] == 1
    assert Job.objects.filter(pk=kept.id).exists()


def test_a_failed_job_retried_by_an_operator_is_pending_again(tmp_path):
    with steady_queue.batch(on_finish=tasks.batch_callback) as opened:
        tasks.batch_member.enqueue(1, fails=True)
        blocker = tasks.sleep_for.enqueue(0)
    # Run the failing member only: the batch waits for the other job.
    ReadyExecution.objects.filter(job_id=blocker.id).delete()
    burst().start()
    assert steady_queue.get_batch(opened.id).failed == 1

    FailedExecution.objects.all().retry_all()

    status = steady_queue.get_batch(opened.id)
    assert (status.failed, status.pending) == (0, 2)


def test_a_call_merged_into_a_pending_unique_run_is_not_counted():
    first = tasks.refresh_listing.enqueue(7)
    with steady_queue.batch() as opened:
        merged = tasks.refresh_listing.enqueue(7)
        tasks.refresh_listing.enqueue(8)

    assert merged.id == first.id
    assert steady_queue.get_batch(opened.id).size == 1
    assert Job.objects.filter(batch_id=opened.id).count() == 1


def test_a_refused_duplicate_caught_in_the_block_is_not_counted():
    tasks.export_account.enqueue(1)
    with steady_queue.batch() as opened:
        with pytest.raises(DuplicateTaskError):
            tasks.export_account.enqueue(1)
        tasks.export_account.enqueue(2)

    assert steady_queue.get_batch(opened.id).size == 1


def test_a_job_discarded_at_enqueue_by_its_concurrency_limit_counts_as_failed(
    tmp_path,
):
    path = str(tmp_path / "runs")
    with steady_queue.batch(on_finish=tasks.batch_callback) as opened:
        tasks.one_or_none.enqueue(path, "k", 0)
        tasks.one_or_none.enqueue(path, "k", 0)

    status = steady_queue.get_batch(opened.id)
    assert (status.size, status.failed, status.pending) == (2, 1, 1)

    burst().start()

    status = steady_queue.get_batch(opened.id)
    assert (status.state, status.finished, status.failed) == (BatchState.FAILED, 1, 1)
    assert len(callbacks_run()) == 1


def test_a_callback_that_cannot_be_enqueued_is_recorded_and_ends_the_batch():
    with steady_queue.batch(on_finish=tasks.batch_callback) as opened:
        tasks.batch_member.enqueue(1)
    Batch.objects.filter(pk=opened.id).update(
        callbacks={
            "finish": {
                "task_path": "tests.tasks.no_such_callback",
                "queue_name": "default",
                "priority": 0,
                "backend": "default",
            }
        }
    )

    burst().start()

    status = steady_queue.get_batch(opened.id)
    assert status.state == BatchState.SUCCEEDED
    assert status.callback_results["finish"].startswith("error: TaskNotFoundError")
    assert Job.objects.get(batch_id=opened.id).finished_at is not None


def test_a_job_of_the_batch_adds_jobs_that_the_batch_then_waits_for():
    with steady_queue.batch(on_finish=tasks.batch_callback) as opened:
        tasks.fan_out.enqueue(opened.id, 4)

    burst().start()

    status = steady_queue.get_batch(opened.id)
    assert (status.state, status.size, status.finished) == (BatchState.SUCCEEDED, 5, 5)
    [run] = callbacks_run()
    assert run["size"] == 5
    # The callback came after every added job had finished.
    callback = Job.objects.get(task_path=CALLBACK)
    members = Job.objects.filter(task_path="tests.tasks.batch_member")
    assert all(member.finished_at <= callback.enqueued_at for member in members)


def test_jobs_blocked_by_a_concurrency_limit_run_in_turn_and_end_the_batch(
    tmp_path,
):
    path = str(tmp_path / "runs")
    with steady_queue.batch(on_finish=tasks.batch_callback) as opened:
        for _ in range(3):
            tasks.one_at_a_time.enqueue(path, "account-1", 0)

    status = steady_queue.get_batch(opened.id)
    assert (status.size, status.pending) == (3, 3)

    burst().start()

    status = steady_queue.get_batch(opened.id)
    assert (status.state, status.finished) == (BatchState.SUCCEEDED, 3)
    [run] = callbacks_run()
    assert run["finished"] == 3

"""Dependencies in-process: each rule of depends_on(), on the real database."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import steady_queue
from steady_queue import depends_on
from steady_queue.compat import TaskResultStatus
from steady_queue.exceptions import DependencyError
from steady_queue.models import (
    BlockedExecution,
    ClaimedExecution,
    FailedExecution,
    Job,
    JobDependency,
    ReadyExecution,
    ScheduledExecution,
)
from steady_queue.pipeline.outcome import Outcome
from steady_queue.states import State
from steady_queue.testing import run_pending

from .. import tasks
from ..factories import registered_process

pytestmark = pytest.mark.django_db(transaction=True)

DEPENDENCY_FAILED = "steady_queue.exceptions.DependencyFailedError"


def state(result):
    return Job.objects.get(pk=result.id).observed_state().state


def error_of(result):
    return Job.objects.get(pk=result.id).errors[-1]


def test_a_dependent_waits_blocked_and_runs_once_all_succeeded():
    charge = tasks.returns.enqueue("charged")
    reserve = tasks.returns.enqueue("reserved")
    with depends_on(charge, reserve):
        ship = tasks.collects_dependencies.enqueue()

    assert ship.status == TaskResultStatus.READY  # waiting reads as READY
    assert ship.task.get_backend().get_result(ship.id).status == TaskResultStatus.READY
    waiting = BlockedExecution.objects.get(job_id=ship.id)
    assert (waiting.waits_for, waiting.dependencies_pending) == ("dependency", 2)
    assert not ReadyExecution.objects.filter(job_id=ship.id).exists()
    assert set(
        Job.objects.filter(pk__in=[charge.id, reserve.id]).values_list(
            "has_dependents", flat=True
        )
    ) == {True}

    run_pending()

    ship.refresh()
    assert ship.status == TaskResultStatus.SUCCESSFUL
    # dependency_results(): in the order given, return values readable.
    assert ship.return_value == ["charged", "reserved"]


def test_a_dependent_never_starts_before_its_last_dependency_succeeded():
    first = tasks.returns.enqueue(1)
    second = tasks.returns.enqueue(2)
    with depends_on(first, second):
        after = tasks.collects_dependencies.enqueue()

    run_pending(max_tasks=1)
    assert state(after) == State.BLOCKED
    assert BlockedExecution.objects.get(job_id=after.id).dependencies_pending == 1
    run_pending()
    after.refresh()
    assert after.return_value == [1, 2]


def test_a_failed_dependency_ends_the_dependent_without_running_naming_it():
    broken = tasks.fail.enqueue("card declined")
    fine = tasks.returns.enqueue("fine")
    with depends_on(fine, broken):
        ship = tasks.collects_dependencies.enqueue()
        then = tasks.noop.enqueue()  # every enqueue in the block waits
    with depends_on(ship):
        after_ship = tasks.noop.enqueue()  # and a failure goes down the chain

    run_pending()

    for result in (ship, then, after_ship):
        result.refresh()
        assert result.status == TaskResultStatus.FAILED
        assert result.worker_ids == []  # never ran
    error = error_of(ship)
    assert error["exception_class_path"] == DEPENDENCY_FAILED
    assert f"Job {broken.id} (tests.tasks.fail)" in error["traceback"]
    assert "failed for good (ValueError)" in error["traceback"]
    assert (
        f"Job {ship.id} (tests.tasks.collects_dependencies)"
        in (error_of(after_ship)["traceback"])
    )


def test_run_anyway_runs_the_dependent_whatever_its_dependencies_ended_with():
    broken = tasks.fail.enqueue()
    fine = tasks.returns.enqueue("fine")
    with depends_on(broken, fine, run_anyway=True):
        cleanup = tasks.collects_dependencies.enqueue()

    run_pending()

    cleanup.refresh()
    assert cleanup.status == TaskResultStatus.SUCCESSFUL
    # Each result says how its job ended.
    assert cleanup.return_value == ["failed", "fine"]


def test_dependencies_that_ended_before_the_enqueue_count_at_once():
    done = tasks.returns.enqueue("done")
    run_pending()
    with depends_on(done):
        after = tasks.collects_dependencies.enqueue()
    assert after.status == TaskResultStatus.READY
    assert ReadyExecution.objects.filter(job_id=after.id).exists()
    assert not BlockedExecution.objects.filter(job_id=after.id).exists()

    broken = tasks.fail.enqueue()
    run_pending()
    with depends_on(broken):
        doomed = tasks.noop.enqueue()
    assert doomed.status == TaskResultStatus.FAILED
    assert DEPENDENCY_FAILED == error_of(doomed)["exception_class_path"]

    run_pending()
    after.refresh()
    assert after.return_value == ["done"]


def test_a_dependency_that_is_gone_ends_the_dependent():
    with depends_on("987654321"):
        doomed = tasks.noop.enqueue()
    assert doomed.status == TaskResultStatus.FAILED
    assert "was gone when this job was enqueued" in error_of(doomed)["traceback"]


def test_a_discarded_dependency_ends_its_dependents():
    later = tasks.returns.using(run_after=steady_queue_later()).enqueue(1)
    with depends_on(later):
        after = tasks.noop.enqueue()
    ScheduledExecution.objects.filter(job_id=later.id).discard_all()
    after.refresh()
    assert after.status == TaskResultStatus.FAILED
    assert "was discarded" in error_of(after)["traceback"]


def test_a_cancelled_dependency_ends_its_dependents():
    running = tasks.returns.enqueue(1)
    with depends_on(running):
        after = tasks.noop.enqueue()
    claim_by_a_fake_process(running)
    ClaimedExecution.objects.filter(job_id=running.id).cancel_all(by="operator")
    after.refresh()
    assert after.status == TaskResultStatus.FAILED
    assert "was cancelled" in error_of(after)["traceback"]


def test_discarding_a_waiting_dependent_works_and_its_dependency_still_finishes():
    first = tasks.returns.enqueue(1)
    with depends_on(first):
        after = tasks.noop.enqueue()
    assert BlockedExecution.objects.filter(job_id=after.id).discard_all() == [
        int(after.id)
    ]
    run_pending()
    first.refresh()
    assert first.status == TaskResultStatus.SUCCESSFUL
    assert not Job.objects.filter(pk=after.id).exists()


def test_blocks_nest_and_accept_ids_and_batches():
    first = tasks.returns.enqueue("a")
    with steady_queue.batch() as opened:
        tasks.returns.enqueue("b")
        tasks.returns.enqueue("c")
    with depends_on(first.id):
        with depends_on(opened):
            inner = tasks.collects_dependencies.enqueue()
        outer_only = tasks.collects_dependencies.enqueue()
    assert BlockedExecution.objects.get(job_id=inner.id).dependencies_pending == 3
    run_pending()
    inner.refresh()
    outer_only.refresh()
    assert inner.return_value == ["a", "b", "c"]
    assert outer_only.return_value == ["a"]


def test_depends_on_refuses_what_is_not_a_job():
    with pytest.raises(DependencyError, match="not a steady_queue job id"):
        with depends_on("nope"):
            pass
    with pytest.raises(DependencyError, match="takes TaskResults"):
        with depends_on(3.5):
            pass
    with pytest.raises(DependencyError, match="inside a task"):
        steady_queue.dependency_results()


def test_fan_out_and_fan_in_of_any_width():
    with steady_queue.batch() as opened:
        for number in range(300):
            tasks.returns.enqueue(number)
    with depends_on(opened):
        total = tasks.collects_dependencies.enqueue()
    with depends_on(total):
        fanned = [tasks.noop.enqueue() for _ in range(50)]
    run_pending()
    total.refresh()
    assert total.return_value == list(range(300))
    assert {Job.objects.get(pk=r.id).observed_state().state for r in fanned} == {
        State.FINISHED
    }


def test_a_dependency_retried_is_not_failed_until_its_retries_run_out(tmp_path):
    path = str(tmp_path / "attempts")
    flaky = tasks.fails_then_succeeds.enqueue(path)
    with depends_on(flaky):
        after = tasks.collects_dependencies.enqueue()
    run_pending()
    after.refresh()
    assert after.status == TaskResultStatus.SUCCESSFUL
    assert after.return_value == ["second try"]


def test_a_released_dependent_goes_through_its_concurrency_limit(tmp_path):
    path = str(tmp_path / "runs")
    first = tasks.returns.enqueue(1)
    holder = tasks.one_at_a_time.enqueue(path, "key", 0)  # takes the slot
    with depends_on(first):
        limited = tasks.one_at_a_time.enqueue(path, "key", 0)
    run_pending(max_tasks=1)  # runs `first` only (ready first)
    waiting = BlockedExecution.objects.get(job_id=limited.id)
    # Released by its dependency, it now waits for the key's slot.
    assert waiting.waits_for == "concurrency"
    assert waiting.concurrency_key.endswith("key")
    run_pending()
    for result in (holder, limited):
        result.refresh()
        assert result.status == TaskResultStatus.SUCCESSFUL


def test_concurrency_releases_never_let_a_waiting_dependent_go():
    first = tasks.returns.using(run_after=steady_queue_later()).enqueue(1)
    with depends_on(first):
        after = tasks.noop.enqueue()
    blocked = BlockedExecution.objects
    with transaction.atomic():
        assert blocked.release_next([""], holding=False) == []
    assert blocked.release_expired() == []
    assert blocked.release_due_rates() == ([], None)
    assert state(after) == State.BLOCKED


def test_unique_dependents_merge_as_any_duplicate_does():
    first = tasks.returns.enqueue(1)
    with depends_on(first):
        one = tasks.refresh_listing.enqueue(7)
        two = tasks.refresh_listing.enqueue(7)
    assert one.id == two.id
    run_pending()
    one.refresh()
    assert one.status == TaskResultStatus.SUCCESSFUL


def test_a_job_without_dependencies_pays_no_query_for_them():
    tasks.returns.enqueue(1)  # warm up
    run_pending()
    with CaptureQueriesContext(connection) as enqueue:
        tasks.returns.enqueue(2)
    assert not any("dependenc" in q["sql"] for q in enqueue.captured_queries)
    with CaptureQueriesContext(connection) as finish:
        run_pending()
    assert not any("dependenc" in q["sql"] for q in finish.captured_queries)


def test_a_job_that_gained_a_dependent_while_it_ran_releases_it():
    """The race: the worker read has_dependents False, then a dependent was
    enqueued before the finish. The finish reads the flag back and settles."""
    running = tasks.returns.enqueue("value")
    job = Job.objects.get(pk=running.id)  # as a worker read it
    assert not job.has_dependents
    with depends_on(running):
        after = tasks.collects_dependencies.enqueue()
    claim = claim_by_a_fake_process(running)
    with CaptureQueriesContext(connection) as finish:
        recorded = ClaimedExecution.objects.finalize_all(
            [returned(job, "value")], claim.process_id
        )
    assert [o.job.pk for o in recorded] == [int(running.id)]
    if connection.vendor == "postgresql":
        # The one-statement finish was tried, refused itself, and the ORM
        # path recorded it.
        sqls = [query["sql"] for query in finish.captured_queries]
        assert any("gained dependents" in sql for sql in sqls)
    assert state(after) == State.READY
    run_pending()
    after.refresh()
    assert after.return_value == ["value"]


def test_of_two_jobs_finished_together_the_one_that_gained_a_dependent_settles():
    """The same race in a finish of two jobs: on MySQL both are written by
    one UPDATE joined to their values, which the one whose flag changed
    does not match; it is found and written after."""
    running, other = tasks.returns.enqueue("value"), tasks.returns.enqueue("other")
    jobs = [Job.objects.get(pk=result.id) for result in (running, other)]
    with depends_on(running):
        after = tasks.collects_dependencies.enqueue()
    claims = [claim_by_a_fake_process(result) for result in (running, other)]
    outcomes = [
        returned(job, value)
        for job, value in zip(jobs, ["value", "other"], strict=True)
    ]
    recorded = ClaimedExecution.objects.finalize_all(outcomes, claims[0].process_id)
    assert sorted(o.job.pk for o in recorded) == [int(running.id), int(other.id)]
    for result, value in ((running, "value"), (other, "other")):
        result.refresh()
        assert (result.status, result.return_value) == ("SUCCESSFUL", value)
    assert state(after) == State.READY


def test_clear_finished_keeps_a_dependency_whose_dependent_has_not_ended():
    first = tasks.returns.enqueue(1)
    second = tasks.returns.using(run_after=steady_queue_later()).enqueue(2)
    with depends_on(first, second):
        after = tasks.collects_dependencies.enqueue()
    run_pending()
    Job.objects.clear_finished(timezone.now() + timedelta(days=1))
    assert Job.objects.filter(pk=first.id).exists()
    run_pending(run_scheduled=True)
    after.refresh()
    assert after.return_value == [1, 2]
    Job.objects.clear_finished(timezone.now() + timedelta(days=1))
    assert not Job.objects.filter(pk__in=[first.id, after.id]).exists()
    assert not JobDependency.objects.filter(job_id=after.id).exists()


def test_clear_finished_keeps_a_dependency_that_succeeded_before_its_dependent():
    done = tasks.returns.enqueue("done")
    run_pending()
    later = tasks.returns.using(run_after=steady_queue_later()).enqueue("later")
    with depends_on(done, later):
        waiting = tasks.collects_dependencies.enqueue()  # blocked on later
    with depends_on(done):
        ready = tasks.collects_dependencies.enqueue()  # ready at once
    assert state(ready) == State.READY

    Job.objects.clear_finished(timezone.now() + timedelta(days=1))

    assert Job.objects.filter(pk=done.id).exists()
    run_pending(run_scheduled=True)
    for result, values in ((waiting, ["done", "later"]), (ready, ["done"])):
        result.refresh()
        assert result.return_value == values
    Job.objects.clear_finished(timezone.now() + timedelta(days=1))
    assert not Job.objects.exists()


def test_a_dependent_in_a_batch_counts_there_when_a_dependency_ends_it():
    broken = tasks.fail.enqueue()
    with steady_queue.batch() as opened, depends_on(broken):
        tasks.noop.enqueue()
    run_pending()
    status = steady_queue.get_batch(opened.id)
    assert (status.size, status.failed, status.pending) == (1, 1, 0)
    assert FailedExecution.objects.count() == 2


def steady_queue_later():
    return datetime(2100, 1, 1, tzinfo=UTC)


def returned(job, value):
    """The outcome of a run of ``job`` (tasks.returns) that returned ``value``."""
    return Outcome(
        job=job,
        claimed_at=timezone.now(),
        task=tasks.returns,
        worker_id="w",
        finished_at=timezone.now(),
        succeeded=True,
        return_value=value,
    )


def claim_by_a_fake_process(result):
    """Claim a ready job as a worker would, by a registered process; its claim."""
    ReadyExecution.objects.filter(job_id=result.id).delete_rows()
    ClaimedExecution.objects.claim_all(
        [int(result.id)], registered_process(7), timezone.now()
    )
    return ClaimedExecution.objects.get(job_id=result.id)


def statements_to_finish_one(width):
    """Statements run_pending() sends to run and finish one dependency of a
    fan-in of ``width`` jobs (the rest already finished)."""
    members = [tasks.returns.enqueue(n) for n in range(width)]
    with depends_on(*members):
        tasks.noop.enqueue()
    run_pending(max_tasks=width - 1)
    with CaptureQueriesContext(connection) as finish:
        run_pending(max_tasks=1)
    assert Job.objects.filter(pk=members[-1].id, finished_at__isnull=False).exists()
    return len(finish.captured_queries)


def test_a_finish_takes_as_many_statements_however_wide_the_fan_in():
    narrow = statements_to_finish_one(3)
    Job.objects.all().delete()
    wide = statements_to_finish_one(400)
    assert wide == narrow


def test_releasing_a_wide_fan_out_takes_a_bounded_number_of_statements():
    counts = {}
    for width in (3, 400):
        first = tasks.returns.enqueue(1)
        with depends_on(first):
            for _ in range(width):
                tasks.noop.enqueue()
        with CaptureQueriesContext(connection) as finish:
            run_pending(max_tasks=1)
        assert not BlockedExecution.objects.exists()
        counts[width] = len(finish.captured_queries)
        run_pending()
    # Only inserting the ready rows grows with the width, a statement per
    # chunk a database takes in one INSERT.
    assert counts[400] <= counts[3] + 400 // 100


def test_enqueue_on_commit_inside_depends_on_waits_all_the_same():
    first = tasks.returns.enqueue(1)
    with transaction.atomic(), depends_on(first):
        steady_queue.enqueue_on_commit(tasks.collects_dependencies)
    [waiting] = BlockedExecution.objects.waiting_on_dependencies()
    run_pending()
    assert Job.objects.get(pk=waiting.job_id).return_value == [1]


def test_a_job_with_dependents_is_kept_when_finished_jobs_are_not():
    first = tasks.returns.enqueue("kept")
    with depends_on(first):
        after = tasks.collects_dependencies.enqueue()
    claim = claim_by_a_fake_process(first)
    outcome = returned(Job.objects.get(pk=first.id), "kept")
    ClaimedExecution.objects.finalize_all(
        [outcome], claim.process_id, preserve_finished_jobs=False
    )
    assert Job.objects.filter(pk=first.id).exists()
    run_pending()
    after.refresh()
    assert after.return_value == ["kept"]

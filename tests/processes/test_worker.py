"""Worker, in-process: poll() claims, runs, records, times out and recycles.

Most tests hand the worker a HeldPool (conftest.py), which runs nothing until
the test says so: what is claimed, running or finished at each poll is then
the test's choice, and no thread or fork is involved. One test runs a real Pool.
"""

import copy
import logging
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone
from django.utils.connection import ConnectionDoesNotExist

from steady_queue.compat import TaskResultStatus
from steady_queue.models import (
    ClaimedExecution,
    FailedExecution,
    Job,
    Process,
    ReadyExecution,
)
from steady_queue.processes import outcome_recorder
from steady_queue.processes.queue_selector import QueueSelector
from steady_queue.processes.worker import CLAIM_CHECK_INTERVAL, FULL_POOL_WAIT

from .. import tasks
from ..helpers import scaled, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def default_timeout(settings):
    """Give every task without its own @timeout this many seconds to run."""

    def apply(seconds):
        configured = copy.deepcopy(settings.TASKS)
        configured["default"]["OPTIONS"]["timeout"] = seconds
        settings.TASKS = configured

    return apply


def refreshed(*results):
    for result in results:
        result.refresh()
    return results


def error_of(result):
    """(exception class path, traceback) of the result's last error."""
    error = result.errors[-1]
    return error.exception_class_path, error.traceback


def claimed_ids(worker):
    held = ClaimedExecution.objects.held_by(worker.process.pk)
    return set(held.values_list("job_id", flat=True))


def job_ids(*results):
    return {int(result.id) for result in results}


class Ran:
    """An outcome's timing, as Prefetch.observe reads it."""

    def __init__(self, seconds):
        self.finished_at = timezone.now()
        self.claimed_at = self.finished_at - timedelta(seconds=seconds)


def short_runs_seen(worker):
    worker.prefetch.observe([Ran(0.001)] * 5)
    # The last claim took all it asked for: a backlog waits.
    worker.prefetch.claimed(1, 1)


def test_a_poll_claims_one_job_per_idle_thread_and_hands_them_to_the_pool(
    make_worker,
):
    first, second, third = (tasks.add.enqueue(n, n) for n in range(3))
    worker = make_worker(threads=2)

    # A claim that filled every idle thread polls again at once.
    assert worker.poll() == 0

    assert claimed_ids(worker) == job_ids(first, second)
    assert worker.in_flight == job_ids(first, second)
    assert len(worker.pool.held) == 2
    assert set(ReadyExecution.objects.values_list("job_id", flat=True)) == job_ids(
        third
    )
    # A full pool claims nothing and sleeps until a thread frees up, or at
    # most until its running jobs' claims are due a check (cancellations).
    assert 0 < worker.poll() <= CLAIM_CHECK_INTERVAL
    assert claimed_ids(worker) == job_ids(first, second)


def test_a_worker_polls_only_the_jobs_of_its_own_alias(make_worker):
    """TASKS["shared"] keeps its jobs in the default alias's database."""
    theirs = [tasks.add.enqueue(n, n) for n in range(3)]
    mine = tasks.add.using(backend="shared").enqueue(9, 9)
    shared, default = make_worker(backend="shared", threads=4), make_worker(threads=4)

    shared.poll()
    assert claimed_ids(shared) == job_ids(mine)
    shared.poll()
    assert claimed_ids(shared) == job_ids(mine)
    default.poll()
    assert claimed_ids(default) == job_ids(*theirs)


def test_a_poll_that_found_less_than_it_could_take_waits_the_polling_interval(
    make_worker,
):
    tasks.add.enqueue(1, 1)
    worker = make_worker(threads=3, polling_interval=0.25)

    assert worker.poll() == 0.25
    assert len(worker.pool.held) == 1


def test_outcomes_are_recorded_at_the_next_poll(make_worker):
    good = tasks.add.enqueue(2, 3)
    bad = tasks.fail.enqueue("no luck")
    worker = make_worker(threads=2)
    worker.poll()

    worker.pool.run_all()
    # Finished, but nothing is written until the main loop polls again.
    assert len(worker.recorder.arrived) == 2
    assert claimed_ids(worker) == job_ids(good, bad)

    worker.poll()

    good, bad = refreshed(good, bad)
    assert (good.status, good.return_value) == (TaskResultStatus.SUCCESSFUL, 5)
    assert bad.status == TaskResultStatus.FAILED
    path, trace = error_of(bad)
    assert path == "builtins.ValueError"
    assert "no luck" in trace
    assert good.worker_ids == bad.worker_ids == [worker.name]
    assert not ClaimedExecution.objects.exists()
    assert list(FailedExecution.objects.values_list("job_id", flat=True)) == [
        int(bad.id)
    ]
    assert (
        not worker.in_flight
        and not worker.recorder.arrived
        and not worker.recorder.pending
    )


def test_an_outcome_waits_a_few_ms_for_the_jobs_still_running_beside_it(
    make_worker, monkeypatch
):
    # A window a loaded machine does not pass between two lines of the test
    # (5 ms did, once in CI).
    window = scaled(0.5)
    monkeypatch.setattr(outcome_recorder, "FLUSH_WINDOW", window)
    first, second = tasks.add.enqueue(1, 1), tasks.add.enqueue(2, 2)
    worker = make_worker(threads=2)
    worker.poll()
    # Claiming ahead: short runs seen, and a backlog waiting.
    short_runs_seen(worker)

    worker.pool.run_first()
    # The other job still runs: its outcome may come within the window, to be
    # written in the same transaction, and the claim to refill both threads.
    assert 0 < worker.poll() <= window
    assert claimed_ids(worker) == job_ids(first, second)

    worker.pool.run_all()
    # Nothing runs any more: no reason to wait.
    worker.poll()

    assert not ClaimedExecution.objects.exists()
    assert not worker.in_flight


def test_an_outcome_is_written_once_its_window_has_passed(make_worker):
    quick, slow = tasks.add.enqueue(1, 1), tasks.add.enqueue(2, 2)
    worker = make_worker(threads=2)
    worker.poll()
    # Claiming ahead: short runs seen, and a backlog waiting.
    short_runs_seen(worker)

    worker.pool.run_first()
    wait_for(
        lambda: worker.recorder.due_in(running=1) == 0,
        message="the flush window passed",
    )
    worker.poll()

    assert claimed_ids(worker) == job_ids(slow)
    assert refreshed(quick)[0].status == TaskResultStatus.SUCCESSFUL


def test_without_claims_ahead_an_outcome_is_written_at_once(make_worker):
    first, second = tasks.add.enqueue(1, 1), tasks.add.enqueue(2, 2)
    worker = make_worker(threads=2)
    worker.poll()

    worker.pool.run_first()
    worker.poll()

    # Written at once, not after a flush window.
    assert claimed_ids(worker) == job_ids(second)
    assert refreshed(first)[0].status == TaskResultStatus.SUCCESSFUL


def test_a_real_pool_runs_sync_and_async_jobs_on_its_own_threads(make_worker):
    sync, coroutine = tasks.add.enqueue(20, 22), tasks.async_add.enqueue(1, 2)
    worker = make_worker(real_pool=True, threads=2)
    worker.poll()

    wait_for(lambda: len(worker.recorder.arrived) == 2, message="both jobs ran")
    worker.poll()

    sync, coroutine = refreshed(sync, coroutine)
    assert (sync.status, sync.return_value) == (TaskResultStatus.SUCCESSFUL, 42)
    assert (coroutine.status, coroutine.return_value) == (
        TaskResultStatus.SUCCESSFUL,
        3,
    )
    assert not ClaimedExecution.objects.exists()
    assert worker.pool.is_idle


def test_after_a_failed_claim_the_next_poll_releases_the_claims_not_in_flight(
    make_worker, caplog
):
    running = tasks.add.enqueue(1, 1)
    worker = make_worker(threads=2)
    worker.poll()
    running_claim = ClaimedExecution.objects.get(job_id=running.id).pk
    lost = tasks.add.enqueue(2, 2)

    # The claim fails, but (as when a COMMIT's reply is lost) one of its
    # claims committed: the row says this worker holds a job it never got.
    worker.database = "an-alias-that-is-not-configured"
    with pytest.raises(ConnectionDoesNotExist):
        worker.poll()
    worker.database = "default"
    selector = QueueSelector(["*"], "default", pause_refresh=0)
    ReadyExecution.objects.claim(selector, 1, worker.process.pk)
    assert worker.claims_uncertain
    assert worker.in_flight == job_ids(running)

    with caplog.at_level(logging.WARNING, logger="steady_queue"):
        worker.poll()

    assert not worker.claims_uncertain
    assert f"released 1 job(s) claimed during a database error: {lost.id}" in (
        caplog.text
    )
    # The running job kept its claim; the lost one went back to ready and was
    # claimed again, this time into the pool.
    assert ClaimedExecution.objects.get(job_id=running.id).pk == running_claim
    assert worker.in_flight == job_ids(running, lost)
    assert len(worker.pool.held) == 2
    # Never started there: the release counted no attempt on the row.
    assert Job.objects.get(pk=int(lost.id)).worker_ids == []


def test_a_job_past_its_timeout_is_failed_and_its_worker_asks_to_be_replaced(
    make_worker, default_timeout
):
    default_timeout(0.05)
    overrun = tasks.add.enqueue(1, 1)
    unlimited = tasks.has_no_timeout.enqueue()
    worker = make_worker(threads=3, polling_interval=5.0)

    # The sleep is cut short to wake when the deadline passes.
    assert worker.poll() <= 0.05
    wait_for(worker.deadlines.overdue, message="the deadline to pass")

    assert worker.poll() == 0

    (overrun,) = refreshed(overrun)
    assert overrun.status == TaskResultStatus.FAILED
    path, trace = error_of(overrun)
    assert path == "steady_queue.exceptions.TaskTimeoutError"
    assert "ran longer than its 0.05 s timeout" in trace
    assert "its thread cannot be stopped in thread mode" in trace
    # The other job is not handed back: it finishes first.
    assert claimed_ids(worker) == job_ids(unlimited)
    assert 0 < worker.poll() <= CLAIM_CHECK_INTERVAL
    assert worker.replacement_reason is None
    assert not worker.stopping

    # The abandoned thread returns after all: its result is dropped.
    worker.pool.run_all()
    worker.poll()

    overrun, unlimited = refreshed(overrun, unlimited)
    assert overrun.status == TaskResultStatus.FAILED
    assert (unlimited.status, unlimited.return_value) == (
        TaskResultStatus.SUCCESSFUL,
        "unlimited",
    )
    assert worker.replacement_reason.startswith("a job ran past its timeout (job ")
    assert "tests.tasks.add, 0.05 s" in worker.replacement_reason
    assert worker.stopping
    assert not ClaimedExecution.objects.exists()


def test_a_run_failed_past_its_timeout_holds_its_unique_key_until_its_thread_ends(
    make_worker, default_timeout
):
    """Its thread runs on, abandoned, until the worker exits: the next run
    of its key must not start beside it (an outside audit saw two runs of
    one @unique(until="finished") key overlap for 4.7 s)."""
    default_timeout(0.05)
    first = tasks.sync_account.enqueue(11)
    worker = make_worker(threads=2, polling_interval=5.0)
    worker.poll()
    wait_for(worker.deadlines.overdue, message="the deadline to pass")
    worker.poll()
    (first,) = refreshed(first)
    assert first.status == TaskResultStatus.FAILED

    assert tasks.sync_account.enqueue(11).id == first.id

    # The abandoned thread returns: its result is dropped, its hold ends.
    worker.pool.run_all()
    worker.poll()
    assert tasks.sync_account.enqueue(11).id != first.id


def test_after_max_tasks_a_worker_claims_no_more_drains_and_asks_to_be_replaced(
    make_worker,
):
    first, second, third = (tasks.add.enqueue(n, 1) for n in range(3))
    worker = make_worker(threads=3, max_tasks=2)

    worker.poll()
    assert claimed_ids(worker) == job_ids(first, second)

    # Threads are idle, but the worker drains instead of claiming.
    assert 0 < worker.poll() <= CLAIM_CHECK_INTERVAL
    assert claimed_ids(worker) == job_ids(first, second)
    assert worker.replacement_reason is None

    worker.pool.run_all()
    worker.poll()

    first, second, third = refreshed(first, second, third)
    assert [first.status, second.status] == [TaskResultStatus.SUCCESSFUL] * 2
    assert third.status == TaskResultStatus.READY
    assert worker.replacement_reason == "recycled after 2 tasks"
    assert worker.stopping


def test_stopping_at_once_records_what_finished_and_hands_back_the_rest(make_worker):
    done, unfinished = tasks.add.enqueue(1, 2), tasks.add.enqueue(3, 4)
    worker = make_worker(threads=2)
    worker.poll()
    finish_first_only(worker)

    worker.stop(immediate=True)
    worker.shutdown()

    done, unfinished = refreshed(done, unfinished)
    assert (done.status, done.return_value) == (TaskResultStatus.SUCCESSFUL, 3)
    assert unfinished.status == TaskResultStatus.READY
    assert list(ReadyExecution.objects.values_list("job_id", flat=True)) == [
        int(unfinished.id)
    ]
    assert not ClaimedExecution.objects.exists()
    assert not Process.objects.filter(name=worker.name).exists()
    assert worker.pool.stopped


def finish_first_only(worker):
    first, *rest = worker.pool.held
    worker.pool.held = rest
    worker.completed(first())


def test_a_graceful_stop_waits_for_running_jobs_and_hands_nothing_back(make_worker):
    results = [tasks.add.enqueue(n, n) for n in range(2)]
    worker = make_worker(real_pool=True, threads=2)
    worker.poll()

    worker.stop()
    worker.shutdown()

    results = refreshed(*results)
    assert [result.return_value for result in results] == [0, 2]
    assert not ClaimedExecution.objects.exists()
    assert not ReadyExecution.objects.exists()
    assert not Process.objects.filter(name=worker.name).exists()


def test_a_job_whose_task_cannot_be_loaded_fails_alone_without_running(make_worker):
    good_before, bad, good_after = (tasks.add.enqueue(n, 10) for n in range(3))
    Job.objects.filter(pk=int(bad.id)).update(task_path="tests.tasks.renamed_away")
    worker = make_worker(threads=3)

    worker.poll()
    # Failed at once, never posted: only the good jobs take a thread.
    assert len(worker.pool.held) == 2
    assert len(worker.recorder.arrived) == 1

    worker.pool.run_all()
    worker.poll()

    good_before, bad, good_after = refreshed(good_before, bad, good_after)
    assert bad.status == TaskResultStatus.FAILED
    path, _ = error_of(bad)
    assert path == "steady_queue.exceptions.TaskNotFoundError"
    assert [good_before.return_value, good_after.return_value] == [10, 12]
    assert not ClaimedExecution.objects.exists()


def test_a_stopping_worker_claims_nothing(make_worker):
    waiting = tasks.add.enqueue(1, 1)
    worker = make_worker(threads=2)
    worker.stop()

    assert worker.poll() == FULL_POOL_WAIT
    assert not ClaimedExecution.objects.exists()
    (waiting,) = refreshed(waiting)
    assert waiting.status == TaskResultStatus.READY


def test_a_worker_stopped_before_it_registered_shuts_down_without_an_error(caplog):
    # A supervisor stopped right after it started a replacement worker: the
    # worker's stop came before its row was written.
    from steady_queue.compat import task_backends
    from steady_queue.conf import WorkerConfig
    from steady_queue.processes.worker import Worker

    worker = Worker(task_backends["default"], WorkerConfig(), name="worker-unborn")
    worker.pool.start()
    worker.stop()
    worker.register()
    assert worker.process is None
    with caplog.at_level("WARNING", logger="steady_queue"):
        worker.shutdown()
    worker.close_wake_pipe()
    assert [r.getMessage() for r in caplog.records if r.levelname != "INFO"] == []


def test_a_ready_row_whose_job_was_deleted_in_sql_is_never_run_and_goes_with_its_claim(
    make_worker,
):
    """The execution tables have no foreign-key constraint (migration 0027):
    a job row deleted by hand leaves its ready row behind. The worker claims
    it, runs nothing for it, and its claim is dropped when the worker stops."""
    gone, kept = tasks.add.enqueue(1, 1), tasks.add.enqueue(2, 2)
    with connection.cursor() as cursor:
        table = connection.ops.quote_name(Job._meta.db_table)
        cursor.execute(f"DELETE FROM {table} WHERE id = %s", [int(gone.id)])
    assert ReadyExecution.objects.filter(job_id=int(gone.id)).exists()
    worker = make_worker(threads=2)

    worker.poll()

    assert worker.in_flight == job_ids(kept)
    worker.pool.run_all()
    worker.stop()
    worker.shutdown()
    (kept,) = refreshed(kept)
    assert kept.status == TaskResultStatus.SUCCESSFUL
    assert not ReadyExecution.objects.exists()
    assert not ClaimedExecution.objects.exists()

"""Timeouts and recycling with a forked `manage.py steady_queue`."""

import pytest

from steady_queue.compat import TaskResultStatus
from steady_queue.models import ClaimedExecution, FailedExecution

from .. import tasks
from ..helpers import wait_for
from .support import (
    enqueue_records,
    rows,
    runs_by_label,
    status_of,
    statuses,
    wait_for_boot,
    wait_for_log,
    wait_for_workers,
)

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

TIMEOUT_ERROR = "steady_queue.exceptions.TaskTimeoutError"


def claimed_by(worker):
    return ClaimedExecution.objects.filter(process_id=worker.pk).count()


def pids_of(path):
    """The pids that ran record_run jobs, from the runs file."""
    with open(path) as file:
        return {int(line.split()[1]) for line in file if line.strip()}


def enqueue_overrun_with_company(path):
    """One job past its 1 s timeout and two 3 s jobs sharing its worker."""
    slow = tasks.overruns_its_timeout.enqueue(str(path), "slow", 30)
    others = [
        tasks.record_run_after.enqueue(str(path), f"other-{index}", 3)
        for index in range(2)
    ]
    return slow, others


def assert_timed_out(result, how):
    current = result.task.get_result(result.id)
    assert current.status == TaskResultStatus.FAILED
    [error] = current.errors
    assert error.exception_class_path == TIMEOUT_ERROR
    assert "ran longer than its 1 s timeout and " + how in error.traceback
    return error


def test_a_sync_job_past_its_timeout_fails_and_its_worker_is_replaced(
    start_supervisor, tmp_path
):
    runs = tmp_path / "runs"
    slow, others = enqueue_overrun_with_company(runs)
    supervisor = start_supervisor()
    [worker] = wait_for_boot(supervisor)

    wait_for(
        lambda: status_of(slow) == TaskResultStatus.FAILED,
        timeout=20,
        message="the overrunning job failed",
    )
    error = assert_timed_out(slow, "was stopped by replacing its worker")
    # The error shows where the stuck thread was.
    assert "Where the task was when it timed out" in error.traceback
    assert "time.sleep(seconds)" in error.traceback

    [replacement] = wait_for_workers(1, exclude_pids={worker.pid})
    assert replacement.name != worker.name
    # The other two finished where they were: nothing was handed back.
    wait_for(
        lambda: statuses(others) == {TaskResultStatus.SUCCESSFUL: 2},
        timeout=20,
        message="the other jobs finished",
    )
    assert runs_by_label(runs) == {"slow": 1, "other-0": 1, "other-1": 1}
    for result in others:
        assert result.task.get_result(result.id).errors == []
    assert FailedExecution.objects.count() == 1
    wait_for_log(supervisor, f"{worker.name} (pid {worker.pid}) asked to be replaced")
    log = supervisor.log()
    assert "ran past its timeout and was failed; its thread cannot be" in log
    assert "ProcessExitError" not in log
    assert "crashed" not in log


def test_an_async_job_past_its_timeout_is_cancelled_in_place(start_supervisor):
    result = tasks.async_overruns_its_timeout.enqueue(30)
    quick = tasks.async_add.enqueue(1, 2)
    supervisor = start_supervisor()
    [worker] = wait_for_boot(supervisor)

    wait_for(
        lambda: status_of(result) == TaskResultStatus.FAILED,
        timeout=10,
        message="the async job was cancelled",
    )
    error = assert_timed_out(result, "was cancelled")
    assert "CancelledError" in error.traceback
    assert status_of(quick) == TaskResultStatus.SUCCESSFUL
    # Cancelled on the loop: no replacement was needed.
    assert [w.name for w in rows("worker")] == [worker.name]
    assert "asked to be replaced" not in supervisor.log()


def test_in_thread_mode_an_overrun_fails_and_the_worker_thread_is_replaced(
    start_supervisor, tmp_path
):
    runs = tmp_path / "runs"
    slow, others = enqueue_overrun_with_company(runs)
    supervisor = start_supervisor("--mode", "thread")
    [worker] = wait_for_boot(supervisor)

    wait_for(
        lambda: status_of(slow) == TaskResultStatus.FAILED,
        timeout=20,
        message="the overrunning job failed",
    )
    assert_timed_out(slow, "was failed; its thread cannot be stopped in thread mode")
    # The others are not interrupted: they finish on the old worker's threads.
    wait_for(
        lambda: statuses(others) == {TaskResultStatus.SUCCESSFUL: 2},
        timeout=20,
        message="the other jobs finished",
    )
    [replacement] = wait_for(
        lambda: [w for w in rows("worker") if w.name != worker.name],
        timeout=20,
        message="a new worker thread registered",
    )
    assert replacement.pid == worker.pid
    assert runs_by_label(runs) == {"slow": 1, "other-0": 1, "other-1": 1}
    wait_for_log(supervisor, f"{worker.name} (pid {worker.pid}) asked to be replaced")


@pytest.mark.parametrize(
    ("env", "reason"),
    [
        ({"SQ_TEST_MAX_TASKS": "3"}, "recycled after 3 tasks; exiting to be replaced"),
        ({"SQ_TEST_MAX_MEMORY_MB": "1"}, "MB over the 1 MB limit; recycled after"),
    ],
    ids=["max_tasks", "max_memory_mb"],
)
def test_a_recycled_worker_runs_every_job_once_and_is_replaced(
    start_supervisor, tmp_path, env, reason
):
    runs = tmp_path / "runs"
    results = enqueue_records(runs, 10)
    supervisor = start_supervisor(env=env)
    wait_for_boot(supervisor)

    wait_for(
        lambda: statuses(results) == {TaskResultStatus.SUCCESSFUL: 10},
        timeout=60,
        interval=0.1,
        message="every job ran",
    )
    assert set(runs_by_label(runs).values()) == {1}
    assert len(runs_by_label(runs)) == 10
    assert FailedExecution.objects.count() == 0
    # The jobs were shared by the worker that ran the first one and at least
    # one replacement. (Not the worker registered at boot: recycling is fast
    # enough that, by the time we look, it may already be a replacement.)
    with open(runs) as file:
        earliest = int(file.readline().split()[1])
    pids = pids_of(runs)
    assert earliest in pids and len(pids) >= 2
    wait_for_log(supervisor, reason)
    # The supervisor logs the replacement when it reaps the worker, which may
    # come after the last job's outcome is visible.
    wait_for_log(supervisor, f"(pid {earliest}) asked to be replaced")
    log = supervisor.log()
    assert "WARNING" not in log and "ERROR" not in log

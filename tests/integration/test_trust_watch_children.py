"""A forked supervisor watches its own children from outside: a worker whose job
holds the GIL past its timeout, or that was stopped (SIGSTOP), runs neither its
sentinel nor its heartbeat thread, so its supervisor kills it and resolves its
claims."""

import time

import pytest

from steady_queue.compat import TaskResultStatus
from steady_queue.models import ClaimedExecution, Process

from .. import tasks
from ..helpers import scaled, wait_for
from .support import (
    QUICK_ALIVE_THRESHOLD,
    QUICK_LIVENESS,
    enqueue_records,
    freeze,
    is_running,
    runs_by_label,
    status_of,
    statuses,
    wait_for_boot,
    wait_for_log,
    wait_for_workers,
)

# A supervisor watching its children (signals, the GIL), whatever the database.
pytestmark = [
    pytest.mark.integration,
    pytest.mark.one_database,
    pytest.mark.django_db(transaction=True),
]

TIMEOUT_ERROR = "steady_queue.exceptions.TaskTimeoutError"
EXIT_ERROR = "steady_queue.exceptions.ProcessExitError"
# Backtracking over this many characters holds the GIL for minutes.
ENDLESS_REGEX = 34


def claimed_by(worker):
    return ClaimedExecution.objects.filter(process_id=worker.pk).count()


def last_error(result):
    return result.task.get_result(result.id).errors[-1]


def test_a_job_holding_the_gil_past_its_timeout_is_failed_and_its_worker_killed(
    start_supervisor, tmp_path
):
    runs = tmp_path / "runs"
    stuck = tasks.backtracks.enqueue(str(runs), ENDLESS_REGEX)
    behind = tasks.record_run_after.enqueue(str(runs), "behind", 0.5)
    supervisor = start_supervisor(env={"SQ_TEST_THREADS": "2"})
    [worker] = wait_for_boot(supervisor)
    wait_for(lambda: "backtracks" in runs_by_label(runs), message="the regex began")
    began = time.monotonic()

    wait_for(
        lambda: status_of(stuck) == TaskResultStatus.FAILED,
        timeout=15,
        message="the job holding the GIL failed",
    )
    # 1 s timeout, then the supervisor's grace (2 s), then a loop or two.
    assert time.monotonic() - began < scaled(8)
    error = last_error(stuck)
    assert error.exception_class_path == TIMEOUT_ERROR
    assert "ran longer than its 1 s timeout and its worker did not stop it" in (
        error.traceback
    )
    assert "so its supervisor killed the worker" in error.traceback
    wait_for(lambda: not is_running(worker.pid), message="the stuck worker is gone")

    # The job claimed next to it either began in the killed worker (it may
    # have run to its end, its outcome not yet written: failed with the
    # worker, so it cannot run twice), or had not begun, GIL-starved (its
    # claim never started: put back to ready, it runs once on the
    # replacement).
    [replacement] = wait_for_workers(1, exclude_pids={worker.pid})
    ended = wait_for(
        lambda: (
            status_of(behind) in (TaskResultStatus.FAILED, TaskResultStatus.SUCCESSFUL)
            and status_of(behind)
        ),
        timeout=15,
        message="the job beside it failed with its worker, or ran again",
    )
    wait_for_log(
        supervisor,
        f"{worker.name} (pid {worker.pid}) did not stop job {stuck.id} "
        "(tests.tasks.backtracks, 1 s) at its timeout and was killed by its "
        "supervisor; started " + replacement.name,
    )
    log = supervisor.log()
    assert f"1 job(s) held by {worker.name} failed (timed out): {stuck.id}" in log
    if ended == TaskResultStatus.FAILED:
        error = last_error(behind)
        assert error.exception_class_path == (
            "steady_queue.exceptions.ProcessExitError"
        )
        assert (
            f"Worker {worker.name} (pid {worker.pid}) did not stop job {stuck.id}"
            in error.traceback
        )
        assert f"1 job(s) held by {worker.name} failed (killed): {behind.id}" in log
        assert runs_by_label(runs).get("behind", 0) <= 1
    else:
        assert runs_by_label(runs).get("behind", 0) == 1
    assert not Process.objects.filter(name=worker.name).exists()


def test_a_stopped_worker_is_killed_and_its_job_failed_within_the_threshold(
    start_supervisor, tmp_path
):
    supervisor = start_supervisor(env=QUICK_LIVENESS)
    [worker] = wait_for_boot(supervisor)
    notes = tmp_path / "notes"
    sleeper = tasks.starts_then_sleeps.enqueue(str(notes), 60)
    wait_for(lambda: claimed_by(worker) == 1, message="the worker took the job")
    # Started, not only claimed: a claim never started goes back to ready.
    wait_for(notes.exists, message="the job to start")

    freeze(worker.pid)
    stopped = time.monotonic()

    wait_for(
        lambda: status_of(sleeper) == TaskResultStatus.FAILED,
        timeout=15,
        message="the stopped worker's job failed",
    )
    # The alive threshold, a maintenance pass (0.5 s) and a margin.
    assert time.monotonic() - stopped < QUICK_ALIVE_THRESHOLD + scaled(4)
    error = last_error(sleeper)
    assert error.exception_class_path == EXIT_ERROR
    assert f"{worker.name} (pid {worker.pid}) stopped heartbeating for " in (
        error.traceback
    )
    assert "and was killed by its supervisor while running this job" in (
        error.traceback
    )
    wait_for(lambda: not is_running(worker.pid), message="the stopped worker is gone")

    [replacement] = wait_for_workers(1, exclude_pids={worker.pid})
    fresh = enqueue_records(tmp_path / "runs", 3)
    wait_for(
        lambda: statuses(fresh) == {TaskResultStatus.SUCCESSFUL: 3},
        timeout=15,
        message="the replacement ran new jobs",
    )
    assert ClaimedExecution.objects.count() == 0
    log = supervisor.log()
    assert f"killing {worker.name} (pid {worker.pid}): it stopped heartbeating" in log
    assert f"and was killed by its supervisor; started {replacement.name}" in log

"""Retries under real workers: backoff, which errors retry, killed workers."""

import os
import signal
from itertools import pairwise

import pytest

from steady_queue.compat import TaskResultStatus
from steady_queue.models import ClaimedExecution, Process

from .. import tasks
from ..helpers import wait_for
from .support import wait_for_boot, wait_for_exit

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def run_times(path):
    with open(path) as file:
        return [float(line.split()[1]) for line in file]


def final_result(result, timeout=30):
    def finished():
        current = result.task.get_result(result.id)
        return current if current.is_finished else None

    return wait_for(finished, timeout=timeout, message=f"job {result.id} finished")


def test_a_flaky_task_succeeds_on_its_third_attempt(start_supervisor, tmp_path):
    path = tmp_path / "runs"
    result = tasks.flaky.enqueue(str(path), 2)
    supervisor = start_supervisor()
    wait_for_boot(supervisor)

    final = final_result(result)

    assert final.status == TaskResultStatus.SUCCESSFUL
    assert final.return_value == {"run": 3, "attempt": 3}
    assert final.attempts == 3
    assert [e.exception_class_path for e in final.errors] == [
        "builtins.ConnectionError"
    ] * 2
    assert "attempt 1 failed" in final.errors[0].traceback
    assert final.id == result.id
    # flaky waits 0.3 s between attempts; the dispatcher polls every 0.1 s.
    times = run_times(path)
    gaps = [later - earlier for earlier, later in pairwise(times)]
    assert all(0.3 <= gap < 3 for gap in gaps), gaps
    supervisor.signal(signal.SIGTERM)
    assert wait_for_exit(supervisor) == 0


def test_only_the_listed_errors_are_retried(start_supervisor, tmp_path):
    results = {
        kind: tasks.picky.enqueue(str(tmp_path / kind.replace(" ", "-")), kind)
        for kind in ("retried", "discarded", "not listed")
    }
    supervisor = start_supervisor()
    wait_for_boot(supervisor)

    finals = {kind: final_result(result) for kind, result in results.items()}

    assert {kind: f.status for kind, f in finals.items()} == {
        kind: TaskResultStatus.FAILED for kind in results
    }
    assert {kind: f.attempts for kind, f in finals.items()} == {
        "retried": 5,
        "discarded": 1,
        "not listed": 1,
    }
    assert len(finals["retried"].errors) == 5
    supervisor.signal(signal.SIGTERM)
    assert wait_for_exit(supervisor) == 0


def test_a_job_whose_worker_was_killed_is_retried(start_supervisor, tmp_path):
    path = tmp_path / "runs"
    result = tasks.dies_once.enqueue(str(path), 60)
    supervisor = start_supervisor()
    wait_for_boot(supervisor)
    claim = wait_for(
        lambda: ClaimedExecution.objects.filter(job_id=result.id).first(),
        message="the job claimed",
    )
    wait_for(path.exists, message="the first attempt started")
    worker = Process.objects.get(pk=claim.process_id)

    os.kill(worker.pid, signal.SIGKILL)
    final = final_result(result)

    assert final.status == TaskResultStatus.SUCCESSFUL
    assert final.return_value == "survived"
    assert final.attempts == 2
    assert [e.exception_class_path for e in final.errors] == [
        "steady_queue.exceptions.ProcessExitError"
    ]
    supervisor.signal(signal.SIGTERM)
    assert wait_for_exit(supervisor) == 0

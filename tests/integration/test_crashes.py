"""kill -9: a dead worker is replaced and its jobs fail; a dead supervisor's
children stop, and the next supervisor cleans up after the whole tree."""

import os
import signal
import time

import pytest
from django.utils import timezone

from steady_queue.compat import TaskResultStatus
from steady_queue.models import ClaimedExecution, Process, ReadyExecution

from .. import tasks
from ..helpers import wait_for
from .support import (
    QUICK_LIVENESS,
    enqueue_records,
    enqueue_sleeps,
    is_running,
    last_error_class,
    live_group_members,
    rows,
    status_of,
    statuses,
    wait_for_boot,
    wait_for_exit,
    wait_for_log,
    wait_for_workers,
    zombie_children,
)

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

EXIT_ERROR = "steady_queue.exceptions.ProcessExitError"
PRUNED_ERROR = "steady_queue.exceptions.ProcessPrunedError"
MISSING_ERROR = "steady_queue.exceptions.ProcessMissingError"


def claimed_by(process):
    return ClaimedExecution.objects.filter(process_id=process.pk).count()


def test_a_killed_worker_is_replaced_and_its_jobs_fail_with_process_exit_error(
    start_supervisor, tmp_path
):
    supervisor = start_supervisor()
    [worker] = wait_for_boot(supervisor)
    notes = [tmp_path / f"notes-{n}" for n in range(3)]
    sleepers = [tasks.starts_then_sleeps.enqueue(str(path), 60) for path in notes]
    wait_for(lambda: claimed_by(worker) == 3, message="the worker took all three")
    # Running, not only claimed: a claim that never started goes back to ready.
    wait_for(lambda: all(n.exists() for n in notes), message="all three to start")

    os.kill(worker.pid, signal.SIGKILL)

    [replacement] = wait_for_workers(1, exclude_pids={worker.pid})
    assert replacement.name != worker.name
    wait_for(
        lambda: statuses(sleepers) == {TaskResultStatus.FAILED: 3},
        message="the killed worker's jobs failed",
    )
    for result in sleepers:
        current = result.task.get_result(result.id)
        assert current.errors[-1].exception_class_path == EXIT_ERROR
        assert f"{worker.name} (pid {worker.pid}) was killed by SIGKILL" in (
            current.errors[-1].traceback
        )
    assert not Process.objects.filter(name=worker.name).exists()

    fresh = enqueue_records(tmp_path / "runs", 5)
    wait_for(lambda: statuses(fresh) == {TaskResultStatus.SUCCESSFUL: 5})
    assert zombie_children(supervisor.pid) == []
    log = supervisor.log()
    assert f"Supervisor {rows('supervisor')[0].name} started" in log
    assert f"{worker.name} (pid {worker.pid}) was killed by SIGKILL; started " in log
    assert f"3 job(s) held by {worker.name} failed (was killed by SIGKILL)" in log


def test_a_worker_that_keeps_dying_young_is_restarted_after_a_growing_delay(
    start_supervisor,
):
    supervisor = start_supervisor()
    [worker] = wait_for_boot(supervisor)
    killed = {worker.pid}
    gaps = []
    for _ in range(2):
        # The live worker's pid, not the largest seen: pids wrap round, and
        # one CI run killed an exited pid (ProcessLookupError).
        os.kill(worker.pid, signal.SIGKILL)
        killed_at = time.monotonic()
        [worker] = wait_for_workers(1, exclude_pids=killed)
        gaps.append(time.monotonic() - killed_at)
        killed.add(worker.pid)
    # Each died within seconds of starting: 1 s, then 2 s before the next.
    assert gaps[0] >= 1.0 and gaps[1] >= 2.0, gaps
    assert is_running(supervisor.pid)
    assert zombie_children(supervisor.pid) == []
    assert supervisor.log().count("was killed by SIGKILL; started worker-") == 2


def test_children_of_a_killed_supervisor_stop_and_hand_their_jobs_back(
    start_supervisor,
):
    supervisor = start_supervisor()
    [worker] = wait_for_boot(supervisor)
    children = [row.pid for row in rows() if row.kind != "supervisor"]
    # Longer than shutdown_timeout (2 s): the orphaned worker must release them.
    sleepers = enqueue_sleeps(4, 2)
    wait_for(lambda: claimed_by(worker) == 2)

    os.kill(supervisor.pid, signal.SIGKILL)
    wait_for_exit(supervisor, timeout=10)

    wait_for(
        lambda: not any(is_running(pid) for pid in children),
        timeout=15,
        message="the orphaned children stopped",
    )
    assert live_group_members(supervisor.pid) == []
    # They deregistered themselves; only the dead supervisor's row is left.
    assert [row.kind for row in rows()] == ["supervisor"]
    assert ClaimedExecution.objects.count() == 0
    assert statuses(sleepers) == {TaskResultStatus.READY: 2}
    assert "its supervisor is gone; stopping" in supervisor.log()

    successor = start_supervisor(env=QUICK_LIVENESS)
    wait_for(
        lambda: not Process.objects.filter(pid=supervisor.pid).exists(),
        timeout=15,
        message="the dead supervisor's row was pruned",
    )
    wait_for_log(successor, "Pruned supervisor")
    # The released jobs run again, to completion, under the new supervisor.
    wait_for(lambda: statuses(sleepers) == {TaskResultStatus.SUCCESSFUL: 2}, timeout=20)


def test_a_new_supervisor_prunes_a_dead_tree_and_fails_what_it_held(
    start_supervisor, tmp_path
):
    first = start_supervisor()
    [worker] = wait_for_boot(first)
    notes = [tmp_path / f"notes-{n}" for n in range(2)]
    sleepers = [tasks.starts_then_sleeps.enqueue(str(path), 60) for path in notes]
    wait_for(lambda: claimed_by(worker) == 2)
    # Running, not only claimed: a claim that never started goes back to ready.
    wait_for(lambda: all(n.exists() for n in notes), message="both to start")
    dead_names = {row.name for row in rows()}

    # The plug is pulled: the whole tree dies at once, nobody cleans up.
    first.kill_group()
    wait_for(lambda: live_group_members(first.pid) == [], message="the tree died")
    # And a claim whose process row is gone altogether (lost, deleted by hand).
    [orphan] = enqueue_sleeps(60, 1)
    ReadyExecution.objects.filter(job_id=orphan.id).delete()
    ClaimedExecution.objects.create(
        job_id=orphan.id, process_id=10**9, created_at=timezone.now()
    )

    successor = start_supervisor(env=QUICK_LIVENESS)
    wait_for(
        lambda: not Process.objects.filter(name__in=dead_names).exists(),
        timeout=20,
        message="the dead tree's rows were pruned",
    )
    wait_for(lambda: statuses(sleepers) == {TaskResultStatus.FAILED: 2}, timeout=10)
    assert {last_error_class(result) for result in sleepers} == {PRUNED_ERROR}
    assert status_of(orphan) == TaskResultStatus.FAILED
    assert last_error_class(orphan) == MISSING_ERROR
    # The log lines follow the commits the waits above saw: wait for them too.
    wait_for_log(successor, f"Pruned worker {worker.name} (pid {worker.pid}")
    wait_for_log(successor, f"2 job(s) held by {worker.name} failed (pruned)")
    wait_for_log(
        successor, "1 job(s) held by unregistered processes failed (process missing)"
    )

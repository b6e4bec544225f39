"""Heartbeats: expired rows are pruned and their claims failed; a process whose
row disappears stops, and its supervisor replaces it."""

import socket
from datetime import timedelta

import pytest
from django.utils import timezone

from steady_queue.compat import TaskResultStatus
from steady_queue.models import ClaimedExecution, Process, ReadyExecution

from ..helpers import wait_for
from .support import (
    enqueue_records,
    enqueue_sleeps,
    last_error_class,
    rows,
    status_of,
    statuses,
    wait_for_boot,
    wait_for_log,
)

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

PRUNED_ERROR = "steady_queue.exceptions.ProcessPrunedError"


def fake_process(name, seconds_since_heartbeat):
    """A worker row that looks like it stopped heartbeating a while ago."""
    at = timezone.now() - timedelta(seconds=seconds_since_heartbeat)
    return Process.objects.create(
        kind="worker",
        name=name,
        pid=999_999,
        hostname=socket.gethostname(),
        metadata={},
        last_heartbeat_at=at,
        created_at=at,
    )


def claim_for(process, result):
    """Move a ready job into a claim held by process, as a worker would."""
    ReadyExecution.objects.filter(job_id=result.id).delete()
    ClaimedExecution.objects.create(
        job_id=result.id, process_id=process.pk, created_at=timezone.now()
    )


def test_an_expired_process_is_pruned_and_its_jobs_fail(start_supervisor, tmp_path):
    stale = fake_process("worker-gone-quiet", seconds_since_heartbeat=60)
    [held] = enqueue_sleeps(60, 1)
    claim_for(stale, held)

    supervisor = start_supervisor()
    wait_for_boot(supervisor)

    wait_for(
        lambda: not Process.objects.filter(pk=stale.pk).exists(),
        message="the expired row was pruned",
    )
    assert status_of(held) == TaskResultStatus.FAILED
    assert last_error_class(held) == PRUNED_ERROR
    error = held.task.get_result(held.id).errors[-1]
    assert "worker worker-gone-quiet (pid 999999" in error.traceback
    assert "stopped heartbeating" in error.traceback
    wait_for_log(supervisor, "Pruned worker worker-gone-quiet (pid 999999")
    wait_for_log(
        supervisor, f"1 job(s) held by worker-gone-quiet failed (pruned): {held.id}"
    )
    # Live processes are untouched and keep working.
    fresh = enqueue_records(tmp_path / "runs", 3)
    wait_for(lambda: statuses(fresh) == {TaskResultStatus.SUCCESSFUL: 3})


def test_a_process_with_a_recent_heartbeat_is_not_pruned(start_supervisor):
    alive = fake_process("worker-still-fine", seconds_since_heartbeat=0)
    stale = fake_process("worker-long-gone", seconds_since_heartbeat=60)
    supervisor = start_supervisor()
    wait_for_boot(supervisor)
    # One pruning pass looks at every row: once the stale one is gone, the
    # recent one was judged too. It heartbeats meanwhile, as a live process
    # does (a boot slowed by a loaded machine may outlast the threshold).
    wait_for(
        lambda: alive.heartbeat() and not Process.objects.filter(pk=stale.pk).exists(),
        message="the stale row pruned, the heartbeating one kept",
    )
    assert Process.objects.filter(pk=alive.pk).exists()
    alive.delete()


@pytest.mark.parametrize(
    ("mode", "ended"),
    [
        pytest.param([], "exited with code 0", id="fork"),
        pytest.param(["--mode", "thread"], "stopped (its thread ended)", id="thread"),
    ],
)
def test_a_worker_whose_row_is_deleted_stops_and_is_replaced(
    start_supervisor, mode, ended
):
    supervisor = start_supervisor(*mode)
    [worker] = wait_for_boot(supervisor)

    Process.objects.filter(pk=worker.pk).delete()

    wait_for(
        lambda: [w for w in rows("worker") if w.name != worker.name],
        message="a replacement registered",
    )
    # The supervisor logs the replacement after forking it: the new worker
    # may register first (one CI run read the log in between).
    replaced = f"{worker.name} (pid {worker.pid}) {ended}; started worker-"
    wait_for(lambda: replaced in supervisor.log(), message="the replacement logged")
    log = supervisor.log()
    assert f"Worker {worker.name}: its process row is gone (pruned?); stopping" in log
    assert len(rows("worker")) == 1

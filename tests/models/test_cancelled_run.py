"""A cancelled limited job keeps its concurrency slot until its run stops."""

import pytest
from django.utils import timezone

from steady_queue.models import (
    BlockedExecution,
    CancelledRun,
    ClaimedExecution,
    Process,
    ReadyExecution,
)
from steady_queue.processes.queue_selector import QueueSelector

from .. import tasks
from ..factories import jobs_of, registered_process, run_outcome

pytestmark = pytest.mark.django_db


def running_and_blocked(process_id=7):
    """One limited job claimed by process ``process_id``, the next blocked."""
    tasks.one_at_a_time.enqueue("/dev/null", "k", 0)
    waiting = tasks.one_at_a_time.enqueue("/dev/null", "k", 0)
    selector = QueueSelector(["*"], "default", pause_refresh=0)
    process = registered_process(process_id)
    (running,) = jobs_of(ReadyExecution.objects.claim(selector, 5, process))
    assert BlockedExecution.objects.filter(job_id=waiting.id).exists()
    return running, int(waiting.id)


def blocked(job_id):
    return BlockedExecution.objects.filter(job_id=job_id).exists()


def cancel(job):
    return ClaimedExecution.objects.filter(job=job).cancel_all("ops")


def test_cancelling_a_running_job_keeps_its_slot_and_the_next_job_blocked():
    running, waiting = running_and_blocked()
    assert cancel(running) == [running.pk]

    assert blocked(waiting)
    assert CancelledRun.objects.filter(job_id=running.pk, process_id=7).exists()


def test_the_slot_is_given_back_when_the_cancelled_run_returns():
    running, waiting = running_and_blocked()
    cancel(running)
    outcome = run_outcome(
        running, worker_id="w", finished_at=timezone.now(), succeeded=True
    )

    assert ClaimedExecution.objects.finalize_all([outcome], 7) == []
    assert not blocked(waiting)
    assert ReadyExecution.objects.filter(job_id=waiting).exists()
    assert not CancelledRun.objects.exists()


@pytest.mark.parametrize("pruned", [False, True], ids=["deregistered", "pruned"])
def test_the_slot_is_given_back_when_the_process_ends(pruned):
    running, waiting = running_and_blocked()
    cancel(running)
    process = Process.objects.get(pk=7)
    if pruned:
        list(Process.objects.filter(pk=7).prune())
    else:
        process.deregister()

    assert ReadyExecution.objects.filter(job_id=waiting).exists()
    assert not CancelledRun.objects.exists()


def test_another_process_finishing_does_not_free_the_slot():
    running, waiting = running_and_blocked()
    cancel(running)
    outcome = run_outcome(
        running, worker_id="w", finished_at=timezone.now(), succeeded=True
    )
    ClaimedExecution.objects.finalize_all([outcome], 8)

    assert blocked(waiting)

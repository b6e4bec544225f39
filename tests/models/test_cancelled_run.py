"""A cancelled limited job keeps its concurrency slot until its run stops."""

import pytest
from django.utils import timezone

from steady_queue.models import (
    BlockedExecution,
    CancelledRun,
    ClaimedExecution,
    FailedExecution,
    Process,
    ReadyExecution,
    Semaphore,
)
from steady_queue.processes.queue_selector import QueueSelector

from .. import tasks
from ..factories import (
    cancelled_then_retried_and_claimed,
    jobs_of,
    registered_process,
    run_outcome,
)

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


def slots_taken():
    return sum(s.limit - s.value for s in Semaphore.objects.filter(key__endswith="k"))


@pytest.mark.parametrize("second", [8, 7], ids=["other-process", "same-process"])
def test_a_retried_job_can_be_cancelled_again_while_its_first_run_goes_on(second):
    job = cancelled_then_retried_and_claimed(7, second)

    assert cancel(job) == [job.pk]
    assert FailedExecution.objects.filter(job_id=job.pk).exists()
    # Each run goes on, each holding its own slot.
    assert CancelledRun.objects.filter(job_id=job.pk).count() == 2
    assert slots_taken() == 2


@pytest.mark.parametrize("second", [8, 7], ids=["other-process", "same-process"])
def test_each_cancelled_run_of_a_job_gives_back_its_own_slot(second):
    job = cancelled_then_retried_and_claimed(7, second)
    cancel(job)
    outcome = run_outcome(
        job, worker_id="w", finished_at=timezone.now(), succeeded=True
    )

    ClaimedExecution.objects.finalize_all([outcome], 7)
    assert slots_taken() == 1
    ClaimedExecution.objects.finalize_all([outcome], second)
    assert slots_taken() == 0
    assert not CancelledRun.objects.exists()

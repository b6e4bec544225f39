"""Semaphore and BlockedExecution: slots taken, given back, expired, released."""

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from steady_queue.exceptions import ProcessExitError, error_payload
from steady_queue.models import (
    BlockedExecution,
    ClaimedExecution,
    FailedExecution,
    ReadyExecution,
    Semaphore,
)
from steady_queue.processes.dispatcher import Dispatcher
from steady_queue.processes.queue_selector import QueueSelector

from .. import tasks
from ..factories import jobs_of, registered_process, run_outcome

pytestmark = pytest.mark.django_db(transaction=True)
KEY = "tests.tasks.one_at_a_time/k"


def acquire(key="k", limit=2):
    with transaction.atomic():
        return Semaphore.objects.acquire(key, limit, timedelta(minutes=1))


def test_acquire_takes_slots_until_none_are_left():
    assert [acquire() for _ in range(3)] == [True, True, False]
    semaphore = Semaphore.objects.get(key="k")
    assert (semaphore.value, semaphore.limit) == (0, 2)


def test_release_gives_slots_back_but_never_above_the_limit():
    acquire()
    acquire()
    Semaphore.objects.release_slots(["k", "k", "k"])
    assert Semaphore.objects.get(key="k").value == 2


def enqueue_blocked(tmp_path, count, priority=0):
    path = str(tmp_path / "runs")
    task = tasks.one_at_a_time.using(priority=priority)
    return [int(task.enqueue(path, "k", 0).id) for _ in range(count)]


def claim_all(process_id=7):
    selector = QueueSelector(["*"], "default", pause_refresh=0)
    return jobs_of(
        ReadyExecution.objects.claim(selector, 100, registered_process(process_id))
    )


def outcome(job, succeeded=True):
    return run_outcome(
        job,
        worker_id="worker-test",
        finished_at=timezone.now(),
        succeeded=succeeded,
        error=None if succeeded else error_payload(ValueError, "no"),
    )


@pytest.mark.parametrize("succeeded", [True, False], ids=["finished", "failed"])
def test_a_finished_run_releases_the_next_blocked_job(tmp_path, succeeded):
    first, *blocked = enqueue_blocked(tmp_path, 2)
    (high,) = enqueue_blocked(tmp_path, 1, priority=5)
    (job,) = claim_all()
    assert job.pk == first

    ClaimedExecution.objects.finalize_all([outcome(job, succeeded)], 7)

    # The higher priority job goes first; the other stays blocked.
    assert set(ReadyExecution.objects.values_list("job_id", flat=True)) == {high}
    assert set(BlockedExecution.objects.values_list("job_id", flat=True)) == set(
        blocked
    )
    assert Semaphore.objects.get(key=KEY).value == 0


def test_a_killed_runs_slot_is_released_with_its_claim(tmp_path):
    first, second = enqueue_blocked(tmp_path, 2)
    claim_all()

    ClaimedExecution.objects.all().fail_all_with(
        error_payload(ProcessExitError, "killed")
    )

    assert FailedExecution.objects.filter(job_id=first).exists()
    assert list(ReadyExecution.objects.values_list("job_id", flat=True)) == [second]


def test_a_released_claim_keeps_its_slot(tmp_path):
    first, second = enqueue_blocked(tmp_path, 2)
    claim_all()

    ClaimedExecution.objects.all().release_all()

    assert list(ReadyExecution.objects.values_list("job_id", flat=True)) == [first]
    assert list(BlockedExecution.objects.values_list("job_id", flat=True)) == [second]


def test_maintenance_expires_abandoned_slots_and_releases_their_waiters(tmp_path):
    _, second, third = enqueue_blocked(tmp_path, 3)
    claim_all()  # its process dies without a trace: nothing gives the slot back
    past = timezone.now() - timedelta(seconds=1)
    Semaphore.objects.update(expires_at=past)
    BlockedExecution.objects.update(expires_at=past)

    Dispatcher.maintain_concurrency(fake_dispatcher())

    assert list(ReadyExecution.objects.values_list("job_id", flat=True)) == [second]
    assert list(BlockedExecution.objects.values_list("job_id", flat=True)) == [third]
    assert Semaphore.objects.get(key=KEY).expires_at > timezone.now()


def test_maintenance_leaves_blocked_jobs_whose_slots_are_held(tmp_path):
    _, second = enqueue_blocked(tmp_path, 2)
    BlockedExecution.objects.update(expires_at=timezone.now() - timedelta(seconds=1))

    Dispatcher.maintain_concurrency(fake_dispatcher())

    assert list(BlockedExecution.objects.values_list("job_id", flat=True)) == [second]


def fake_dispatcher():
    from steady_queue.compat import task_backends
    from steady_queue.conf import DispatcherConfig

    return Dispatcher(task_backends["default"], DispatcherConfig())


def test_a_retried_run_gives_its_slot_up_and_queues_again_for_it(tmp_path):
    from steady_queue.models import ScheduledExecution

    path = str(tmp_path / "runs")
    first = int(tasks.limited_and_retried.enqueue(path, "k", 0).id)
    second = int(tasks.limited_and_retried.enqueue(path, "k", 0).id)
    (job,) = claim_all()
    assert job.pk == first

    (recorded,) = ClaimedExecution.objects.finalize_all([outcome(job, False)], 7)

    assert recorded.retry_at is not None
    # Waiting for its next attempt, the job holds no slot: the other one runs.
    assert list(ReadyExecution.objects.values_list("job_id", flat=True)) == [second]
    ScheduledExecution.objects.dispatch_next_batch(10)
    assert list(BlockedExecution.objects.values_list("job_id", flat=True)) == [first]


def test_an_operator_retry_takes_a_slot_like_an_enqueue(tmp_path):
    path = str(tmp_path / "runs")
    first = int(tasks.one_at_a_time.enqueue(path, "k", 0).id)
    (job,) = claim_all()
    ClaimedExecution.objects.finalize_all([outcome(job, False)], 7)
    holder = int(tasks.one_at_a_time.enqueue(path, "k", 0).id)

    FailedExecution.objects.filter(job_id=first).retry_all()

    assert list(ReadyExecution.objects.values_list("job_id", flat=True)) == [holder]
    assert list(BlockedExecution.objects.values_list("job_id", flat=True)) == [first]


def test_discarding_a_ready_limited_job_gives_its_slot_to_the_next(tmp_path):
    from steady_queue.models import ReadyExecution

    first, *blocked = enqueue_blocked(tmp_path, 2)

    assert BlockedExecution.objects.filter(job_id=blocked[0]).exists()

    ReadyExecution.objects.filter(job_id=first).discard_all()

    assert not BlockedExecution.objects.exists()
    assert ReadyExecution.objects.filter(job_id=blocked[0]).exists()

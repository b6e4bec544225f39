"""Enqueueing limited tasks: ready while slots last, then blocked or discarded."""

import pytest
from django.db import transaction
from django.utils import timezone

from steady_queue import enqueue_many
from steady_queue.compat import TaskResultStatus
from steady_queue.exceptions import ConcurrencyKeyError
from steady_queue.models import (
    BlockedExecution,
    FailedExecution,
    Job,
    ReadyExecution,
    ScheduledExecution,
    Semaphore,
)

from .. import tasks

pytestmark = pytest.mark.django_db(transaction=True)


def states():
    return {
        "ready": set(ReadyExecution.objects.values_list("job_id", flat=True)),
        "blocked": set(BlockedExecution.objects.values_list("job_id", flat=True)),
        "failed": set(FailedExecution.objects.values_list("job_id", flat=True)),
    }


def test_runs_beyond_the_limit_are_blocked_per_key(tmp_path):
    path = str(tmp_path / "runs")
    a = [tasks.three_at_a_time.enqueue(path, "a", 0) for _ in range(4)]
    b = tasks.three_at_a_time.enqueue(path, "b", 0)

    found = states()
    assert found["ready"] == {int(r.id) for r in a[:3]} | {int(b.id)}
    assert found["blocked"] == {int(a[3].id)}
    blocked = BlockedExecution.objects.get()
    assert blocked.concurrency_key == "tests.tasks.three_at_a_time/a"
    assert blocked.expires_at > timezone.now()
    assert Semaphore.objects.get(key="tests.tasks.three_at_a_time/a").value == 0
    assert Semaphore.objects.get(key="tests.tasks.three_at_a_time/b").value == 2
    # A blocked job is READY to django.tasks: it has not started.
    assert a[3].status == TaskResultStatus.READY
    assert tasks.three_at_a_time.get_result(a[3].id).status == TaskResultStatus.READY


def test_groups_share_one_limit(tmp_path):
    path = str(tmp_path / "runs")
    first = tasks.shares_a_limit.enqueue(path, "k", 0)
    second = tasks.also_shares_a_limit.enqueue(path, "k", 0)
    assert states()["ready"] == {int(first.id)}
    assert states()["blocked"] == {int(second.id)}


def test_discard_drops_exactly_the_conflicting_runs(tmp_path):
    path = str(tmp_path / "runs")
    kept = tasks.one_or_none.enqueue(path, "k", 0)
    other_key = tasks.one_or_none.enqueue(path, "other", 0)
    dropped = [tasks.one_or_none.enqueue(path, "k", 0) for _ in range(2)]

    assert states()["ready"] == {int(kept.id), int(other_key.id)}
    assert states()["failed"] == {int(r.id) for r in dropped}
    assert BlockedExecution.objects.count() == 0
    result = tasks.one_or_none.get_result(dropped[0].id)
    assert result.status == TaskResultStatus.FAILED
    (error,) = result.errors
    assert error.exception_class_path == (
        "steady_queue.exceptions.ConcurrencyLimitDiscarded"
    )
    assert "tests.tasks.one_or_none/k" in error.traceback
    assert 'on_conflict="discard"' in error.traceback


def test_a_key_callable_that_raises_writes_nothing():
    with pytest.raises(ConcurrencyKeyError, match="LookupError: no account 7"):
        tasks.broken_key.enqueue(7)
    with pytest.raises(ConcurrencyKeyError):
        enqueue_many(tasks.broken_key, [((1,), {}), ((2,), {})])
    assert Job.objects.count() == 0
    assert Semaphore.objects.count() == 0


def test_bulk_enqueue_takes_slots_and_blocks_the_rest(tmp_path):
    path = str(tmp_path / "runs")
    calls = [((path, key, 0), {}) for key in ["a", "a", "b", "a", "b"]]
    results = enqueue_many(tasks.one_at_a_time, calls)
    ids = [int(r.id) for r in results]

    assert states()["ready"] == {ids[0], ids[2]}
    assert states()["blocked"] == {ids[1], ids[3], ids[4]}


def test_a_rolled_back_enqueue_gives_its_slot_back(tmp_path):
    path = str(tmp_path / "runs")
    with pytest.raises(RuntimeError), transaction.atomic():
        tasks.one_at_a_time.enqueue(path, "k", 0)
        raise RuntimeError("roll back")
    assert Job.objects.count() == 0
    assert Semaphore.objects.count() == 0
    tasks.one_at_a_time.enqueue(path, "k", 0)
    assert len(states()["ready"]) == 1


def test_scheduled_runs_check_the_limit_when_they_come_due(tmp_path):
    path = str(tmp_path / "runs")
    later = timezone.now() + timezone.timedelta(hours=1)
    scheduled = [
        tasks.one_at_a_time.using(run_after=later).enqueue(path, "k", 0)
        for _ in range(2)
    ]
    assert ScheduledExecution.objects.count() == 2
    assert Semaphore.objects.count() == 0

    ScheduledExecution.objects.update(scheduled_at=timezone.now())
    moved = ScheduledExecution.objects.dispatch_next_batch(10)

    assert moved == 2
    assert states()["ready"] == {int(scheduled[0].id)}
    assert states()["blocked"] == {int(scheduled[1].id)}

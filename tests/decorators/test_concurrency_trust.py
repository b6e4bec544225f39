"""Concurrency slots stay honest: an operator's "run now", and leaked keys behind
many busy ones."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone

from steady_queue import enqueue_many
from steady_queue.models import (
    BlockedExecution,
    ClaimedExecution,
    FailedExecution,
    Job,
    ReadyExecution,
    ScheduledExecution,
    Semaphore,
)
from steady_queue.processes.dispatcher import Dispatcher
from steady_queue.processes.queue_selector import QueueSelector

from .. import tasks
from ..factories import jobs_of, registered_process, run_outcome

pytestmark = pytest.mark.django_db(transaction=True)
KEY = "tests.tasks.one_at_a_time/k"


def enqueue(tmp_path, task=tasks.one_at_a_time, key="k", run_after=None):
    if run_after is not None:
        task = task.using(run_after=run_after)
    return int(task.enqueue(str(tmp_path / "runs"), key, 0).id)


def claim_all():
    selector = QueueSelector(["*"], "default", pause_refresh=0)
    return jobs_of(ReadyExecution.objects.claim(selector, 100, registered_process(7)))


def finish(job_id):
    """Record a successful run of a claimed job, as its worker would."""
    job = Job.objects.get(pk=job_id)
    ClaimedExecution.objects.finalize_all(
        [
            run_outcome(
                job,
                worker_id="worker-test",
                finished_at=timezone.now(),
                succeeded=True,
            )
        ],
        7,
    )


def ready_ids():
    return set(ReadyExecution.objects.values_list("job_id", flat=True))


def blocked_ids():
    return set(BlockedExecution.objects.values_list("job_id", flat=True))


def free_slots(key=KEY):
    return Semaphore.objects.get(key=key).value


# Run now on a blocked job: an operator forcing it past the limit.


def test_a_forced_run_takes_a_slot_past_the_limit(tmp_path):
    holder, forced = enqueue(tmp_path), enqueue(tmp_path)
    claim_all()

    assert BlockedExecution.objects.filter(job_id=forced).make_ready_now() == [forced]

    assert ready_ids() == {forced}
    assert free_slots() == -1  # the holder's slot and the forced one
    assert "1 over its limit of 1" in str(Semaphore.objects.get(key=KEY))
    assert [job.pk for job in claim_all()] == [forced]
    assert {holder, forced} == set(
        ClaimedExecution.objects.values_list("job_id", flat=True)
    )


def test_a_forced_runs_finish_gives_back_only_the_slot_it_took(tmp_path):
    holder, forced, waiting = enqueue(tmp_path), enqueue(tmp_path), enqueue(tmp_path)
    claim_all()
    BlockedExecution.objects.filter(job_id=forced).make_ready_now()
    claim_all()

    finish(holder)
    # Two runs held slots of a limit of one: the holder's finish leaves none free.
    assert blocked_ids() == {waiting}
    assert free_slots() == 0

    finish(forced)
    assert ready_ids() == {waiting}
    assert blocked_ids() == set()
    claim_all()
    finish(waiting)

    assert free_slots() == 1  # back to full
    after = [enqueue(tmp_path) for _ in range(3)]
    assert ready_ids() == {after[0]}
    assert blocked_ids() == set(after[1:])


def test_a_forced_run_of_a_key_with_no_semaphore_left_creates_it_taken(tmp_path):
    holder, forced = enqueue(tmp_path), enqueue(tmp_path)
    # The holder vanished and maintenance deleted its expired semaphore.
    Job.objects.filter(pk=holder).delete()
    Semaphore.objects.all().delete()

    BlockedExecution.objects.filter(job_id=forced).make_ready_now()

    assert (free_slots(), Semaphore.objects.get(key=KEY).limit) == (0, 1)


def test_the_admin_action_forces_blocked_jobs(client, tmp_path):
    holder, forced = enqueue(tmp_path), enqueue(tmp_path)
    client.force_login(User.objects.create_superuser("root", "r@example.com", "pw"))

    response = client.post(
        reverse("admin:steady_queue_job_changelist"),
        {"action": "run_now", "_selected_action": [forced], "index": "0"},
        follow=True,
    )

    assert "Moved to ready 1 job(s)." in response.content.decode()
    assert ready_ids() == {holder, forced}
    assert free_slots() == -1


# Run now on a scheduled job: through the limit, as the dispatcher would.


def test_a_scheduled_run_now_takes_a_free_slot(tmp_path):
    scheduled = enqueue(tmp_path, run_after=timezone.now() + timedelta(hours=1))

    assert ScheduledExecution.objects.make_ready_now() == [scheduled]

    assert ready_ids() == {scheduled}
    assert free_slots() == 0
    claim_all()
    finish(scheduled)
    assert free_slots() == 1


def test_a_scheduled_run_now_is_blocked_when_no_slot_is_free(tmp_path):
    holder = enqueue(tmp_path)
    scheduled = enqueue(tmp_path, run_after=timezone.now() + timedelta(hours=1))

    ScheduledExecution.objects.make_ready_now()

    assert ready_ids() == {holder}
    assert blocked_ids() == {scheduled}
    assert free_slots() == 0


def test_a_scheduled_run_now_of_a_discarding_task_is_discarded(tmp_path):
    holder = enqueue(tmp_path, tasks.one_or_none)
    scheduled = enqueue(
        tmp_path, tasks.one_or_none, run_after=timezone.now() + timedelta(hours=1)
    )

    ScheduledExecution.objects.make_ready_now()

    assert ready_ids() == {holder}
    assert FailedExecution.objects.filter(job_id=scheduled).exists()
    (error,) = Job.objects.get(pk=scheduled).errors
    assert error["exception_class_path"].endswith("ConcurrencyLimitDiscarded")


def test_a_scheduled_run_now_of_an_unlimited_task_is_just_ready(tmp_path):
    later = timezone.now() + timedelta(hours=1)
    scheduled = int(tasks.add.using(run_after=later).enqueue(1, 2).id)

    ScheduledExecution.objects.make_ready_now()

    assert ready_ids() == {scheduled}
    assert not Semaphore.objects.exists()


# Maintenance: a leaked key behind many busy keys is not starved.


def block_one_job_per_key(tmp_path, keys):
    """Per key: one job holding its only slot, one blocked behind it; ids."""
    path = str(tmp_path / "runs")
    calls = [((path, key, 0), {}) for key in keys for _ in range(2)]
    results = enqueue_many(tasks.one_at_a_time, calls)
    return [int(result.id) for result in results]


def leak(keys, expired_at):
    """The slot holders of these keys vanish: their semaphores expire unreleased."""
    full_keys = [f"tests.tasks.one_at_a_time/{key}" for key in keys]
    holders = ReadyExecution.objects.filter(job__concurrency_key__in=full_keys)
    Job.objects.filter(pk__in=holders.values("job_id")).delete()
    Semaphore.objects.filter(key__in=full_keys).update(expires_at=expired_at)


def fake_dispatcher():
    from steady_queue.compat import task_backends
    from steady_queue.conf import DispatcherConfig

    return Dispatcher(task_backends["default"], DispatcherConfig())


def test_leaked_keys_behind_150_busy_keys_are_released(tmp_path):
    busy = [f"busy-{index:03}" for index in range(150)]
    leaked = [f"zz-leaked-{index}" for index in range(3)]  # sort last by key
    block_one_job_per_key(tmp_path, busy + leaked)
    now = timezone.now()
    # The busy keys' slots stay held however long the enqueue took (their
    # 5 s duration ran out on a loaded machine, and maintenance rightly
    # released them).
    Semaphore.objects.update(expires_at=now + timedelta(hours=1))
    # Every blocked job is past its expiry, the leaked keys' most recently: a
    # batch of 100 keys in key or expiry order never reaches them.
    BlockedExecution.objects.update(expires_at=now - timedelta(minutes=2))
    leaked_keys = [f"tests.tasks.one_at_a_time/{key}" for key in leaked]
    BlockedExecution.objects.filter(concurrency_key__in=leaked_keys).update(
        expires_at=now - timedelta(minutes=1)
    )
    leak(leaked, expired_at=now - timedelta(seconds=1))

    Dispatcher.maintain_concurrency(fake_dispatcher())

    released = ReadyExecution.objects.filter(job__concurrency_key__in=leaked_keys)
    assert released.count() == 3
    # The busy keys' slots are still held: their blocked jobs wait.
    assert BlockedExecution.objects.count() == 150


def test_release_expired_keeps_going_past_one_batch_but_stops_at_its_bound(tmp_path):
    keys = [f"leaked-{index:03}" for index in range(25)]
    block_one_job_per_key(tmp_path, keys)
    past = timezone.now() - timedelta(seconds=1)
    BlockedExecution.objects.update(expires_at=past)
    leak(keys, expired_at=past)
    Semaphore.objects.expired().delete_rows()
    blocked = BlockedExecution.objects

    first = blocked.release_expired(batch_size=4, max_keys=10)
    assert len(first) == 10
    # The next call goes on with the keys the first one left.
    second = blocked.release_expired(batch_size=4, max_keys=100)
    assert len(second) == 15
    assert not {job.pk for job in first} & {job.pk for job in second}
    assert not BlockedExecution.objects.exists()


def test_release_expired_takes_the_oldest_expiry_first(tmp_path):
    keys = ["a", "b", "c"]
    block_one_job_per_key(tmp_path, keys)
    now = timezone.now()
    for age, key in zip([1, 3, 2], keys, strict=True):
        BlockedExecution.objects.filter(
            concurrency_key=f"tests.tasks.one_at_a_time/{key}"
        ).update(expires_at=now - timedelta(minutes=age))
    leak(keys, expired_at=now - timedelta(seconds=1))
    Semaphore.objects.expired().delete_rows()

    released = BlockedExecution.objects.release_expired(batch_size=1, max_keys=2)

    assert [job.concurrency_key.rpartition("/")[2] for job in released] == ["b", "c"]


# Maintenance compares expiry times by the database's clock.


def test_a_dispatcher_whose_clock_runs_ahead_expires_no_held_slot(
    tmp_path, monkeypatch
):
    holder, waiting = enqueue(tmp_path), enqueue(tmp_path)  # held for 5 s
    assert [job.pk for job in claim_all()] == [holder]
    dispatcher = fake_dispatcher()
    host_now = timezone.now
    # This host's clock is 10 minutes ahead of the database server's.
    monkeypatch.setattr(timezone, "now", lambda: host_now() + timedelta(minutes=10))

    Dispatcher.maintain_concurrency(dispatcher)

    monkeypatch.undo()
    assert free_slots() == 0  # the holder's semaphore was kept
    assert blocked_ids() == {waiting}
    assert ready_ids() == set()

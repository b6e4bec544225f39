"""Rate limits and Snooze, in-process: a dispatcher's poll lets rate-limited
jobs go as their windows open, a worker's poll stamps their starts, and a
snoozed run comes back later without spending a retry."""

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from steady_queue.compat import TaskResultStatus
from steady_queue.models import (
    BlockedExecution,
    FailedExecution,
    Job,
    RateStart,
    RateWindow,
    ReadyExecution,
    ScheduledExecution,
)

from .. import tasks

pytestmark = pytest.mark.django_db(transaction=True)


def run_one_poll(worker):
    """Claim, run every claimed job, and record the outcomes."""
    worker.poll()
    worker.pool.run_all()
    worker.record_outcomes()


def test_a_worker_stamps_the_starts_of_the_jobs_it_claims(make_worker, tmp_path):
    results = [
        tasks.ten_a_second.enqueue(str(tmp_path / "runs"), "a") for _ in range(2)
    ]
    worker = make_worker(threads=1)
    before = RateStart.objects.database_now()

    worker.poll()

    stamped = dict(RateStart.objects.values_list("job_id", "started_at"))
    claimed, waiting = (int(result.id) for result in results)
    assert stamped[claimed] >= before
    assert stamped[waiting] is None  # ready, not claimed: counts, unstamped


def test_the_dispatcher_sleeps_until_a_window_opens_then_lets_its_jobs_go(
    make_worker, make_dispatcher, tmp_path
):
    path = str(tmp_path / "runs")
    results = [tasks.ten_a_second.enqueue(path, "a") for _ in range(12)]
    enqueued = RateStart.objects.database_now()
    worker = make_worker(threads=10)
    run_one_poll(worker)
    dispatcher = make_dispatcher(polling_interval=60.0)

    # Ten admitted: the window opens a second after the first of them (a
    # start counts from its admission until it is stamped), and no later
    # than a second after the last enqueue. Both clocks are the database's,
    # so a loaded machine cannot move this.
    first = RateStart.objects.order_by("admitted_at").first().admitted_at
    [window] = RateWindow.objects.all()
    second = timedelta(seconds=1)
    assert first + second <= window.next_slot_at <= enqueued + second

    # The dispatcher wakes for the window when it opens sooner than its
    # polling interval. The slot is moved 20 s ahead just before the poll:
    # the enqueues and the worker may take over a second on a loaded
    # machine, and so may the poll itself (at 1 s ahead, the window had
    # opened before it was read at load 15, and the poll slept its interval).
    # Nothing waits for it: only the delay the poll asks for is read.
    ahead = 20.0
    before = time.monotonic()
    RateWindow.objects.update(
        next_slot_at=RateStart.objects.database_now() + timedelta(seconds=ahead)
    )
    delay = dispatcher.poll()
    since = time.monotonic() - before
    assert ahead - since - 0.05 <= delay <= ahead
    assert BlockedExecution.objects.count() == 2

    past = timezone.now() - timedelta(seconds=2)
    RateStart.objects.update(started_at=past, counts_until=past)
    RateWindow.objects.update(next_slot_at=past)
    assert dispatcher.poll() == 60.0  # nobody waits any more

    assert set(ReadyExecution.objects.values_list("job_id", flat=True)) == {
        int(result.id) for result in results[10:]
    }


def test_maintenance_forgets_starts_past_their_period_and_idle_windows(
    make_dispatcher, tmp_path
):
    tasks.ten_a_second.enqueue(str(tmp_path / "runs"), "a")
    past = timezone.now() - timedelta(seconds=2)
    RateStart.objects.update(started_at=past, counts_until=past)

    make_dispatcher().poll()

    assert not RateStart.objects.exists()
    assert not RateWindow.objects.exists()


def test_a_snoozed_run_waits_its_delay_with_no_error_and_no_retry_spent(
    make_worker, make_dispatcher, tmp_path
):
    path = str(tmp_path / "runs")
    result = tasks.snoozes_once.enqueue(path, 30)
    worker = make_worker()

    run_one_poll(worker)

    job = Job.objects.get(pk=result.id)
    scheduled = ScheduledExecution.objects.get(job_id=job.pk)
    assert (
        timedelta(seconds=29)
        < scheduled.scheduled_at - job.last_attempted_at
        <= timedelta(seconds=31)
    )
    assert job.errors == [] and job.finished_at is None
    assert job.worker_ids == [worker.name]
    result.refresh()
    assert result.status == TaskResultStatus.READY and result.attempts == 1

    ScheduledExecution.objects.update(scheduled_at=timezone.now())
    make_dispatcher().poll()
    run_one_poll(worker)

    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    # The second run counts both: the snooze was an attempt, not a failure.
    assert result.return_value == {"attempt": 2}
    assert result.attempts == 2 and result.errors == []
    assert not FailedExecution.objects.exists()


def test_an_async_task_snoozes_too(make_worker, make_dispatcher, tmp_path):
    result = tasks.async_snoozes_once.enqueue(str(tmp_path / "runs"), 0)
    worker = make_worker()

    run_one_poll(worker)
    assert ScheduledExecution.objects.filter(job_id=result.id).exists()
    make_dispatcher().poll()
    run_one_poll(worker)

    result.refresh()
    assert (result.status, result.return_value) == (
        TaskResultStatus.SUCCESSFUL,
        "woke",
    )
    assert result.attempts == 2


def test_a_snoozing_limited_job_gives_its_slot_back_while_it_waits(
    make_worker, tmp_path
):
    path = str(tmp_path / "runs")
    first, second = (tasks.snoozes_holding_a_slot.enqueue(path) for _ in range(2))
    assert BlockedExecution.objects.filter(job_id=second.id).exists()
    worker = make_worker(threads=1)

    run_one_poll(worker)

    assert ScheduledExecution.objects.filter(job_id=first.id).exists()
    assert ReadyExecution.objects.filter(job_id=second.id).exists()


@pytest.mark.parametrize(
    ("seconds", "error"),
    [(-1, ValueError), ("5m", TypeError), (float("nan"), ValueError)],
)
def test_snooze_refuses_what_is_not_a_delay(seconds, error):
    from steady_queue import Snooze

    with pytest.raises(error, match="Snooze"):
        Snooze(seconds)

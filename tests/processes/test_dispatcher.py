"""Dispatcher, in-process: poll() dispatches due jobs and keeps slots flowing.

The last tests run the whole Runnable lifecycle (boot, run, shutdown) of a
dispatcher in a thread: it is the simplest Poller.
"""

import threading
from datetime import timedelta

import pytest
from django.utils import timezone

from steady_queue.compat import TaskResultStatus
from steady_queue.models import (
    BlockedExecution,
    Process,
    ReadyExecution,
    ScheduledExecution,
    Semaphore,
)
from steady_queue.processes.queue_selector import QueueSelector

from .. import tasks
from ..factories import registered_process
from ..helpers import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

KEY = "tests.tasks.one_at_a_time/k"


def scheduled(task=tasks.add, args=(1, 1), seconds=3600):
    """Enqueue a job to run ``seconds`` from now."""
    when = timezone.now() + timedelta(seconds=seconds)
    return task.using(run_after=when).enqueue(*args)


def make_due(*results):
    ScheduledExecution.objects.filter(job_id__in=[r.id for r in results]).update(
        scheduled_at=timezone.now() - timedelta(seconds=1)
    )


def ids(queryset):
    return set(queryset.values_list("job_id", flat=True))


def job_ids(*results):
    return {int(result.id) for result in results}


def test_a_poll_makes_due_jobs_ready_and_leaves_future_ones(make_dispatcher):
    due, later = scheduled(), scheduled()
    make_due(due)
    dispatcher = make_dispatcher(polling_interval=0.3)

    assert dispatcher.poll() == 0.3

    assert ids(ReadyExecution.objects) == job_ids(due)
    assert ids(ScheduledExecution.objects) == job_ids(later)
    due.refresh()
    assert due.status == TaskResultStatus.READY


def test_a_full_batch_polls_again_at_once_and_the_rest_goes_next_poll(
    make_dispatcher,
):
    results = [scheduled(args=(n, n)) for n in range(3)]
    make_due(*results)
    dispatcher = make_dispatcher(batch_size=2, polling_interval=0.3)

    assert dispatcher.poll() == 0
    assert ReadyExecution.objects.count() == 2

    assert dispatcher.poll() == 0.3
    assert ids(ReadyExecution.objects) == job_ids(*results)
    assert not ScheduledExecution.objects.exists()


def test_due_limited_jobs_take_a_free_slot_or_are_blocked(make_dispatcher, tmp_path):
    path = str(tmp_path / "runs")
    first, second = (
        scheduled(tasks.one_at_a_time, (path, "k", 0), seconds=60) for _ in range(2)
    )
    # A job waiting for its time holds no slot.
    assert not Semaphore.objects.exists()
    make_due(first, second)

    make_dispatcher().poll()

    assert ids(ReadyExecution.objects) == job_ids(first)
    assert ids(BlockedExecution.objects) == job_ids(second)
    assert Semaphore.objects.get(key=KEY).value == 0
    second.refresh()
    assert second.status == TaskResultStatus.READY  # blocked reads as waiting


def test_a_due_job_that_discards_on_conflict_fails_when_no_slot_is_free(
    make_dispatcher, tmp_path
):
    path = str(tmp_path / "runs")
    holder = tasks.one_or_none.enqueue(path, "k", 0)
    late = scheduled(tasks.one_or_none, (path, "k", 0), seconds=60)
    make_due(late)

    make_dispatcher().poll()

    late.refresh()
    assert late.status == TaskResultStatus.FAILED
    assert late.errors[-1].exception_class_path.endswith("ConcurrencyLimitDiscarded")
    assert ids(ReadyExecution.objects) == job_ids(holder)
    assert not BlockedExecution.objects.exists()


def block_behind_a_dead_holder(tmp_path, count):
    """Enqueue limited jobs; the first is claimed by a process that then dies
    without a trace, so nothing gives its slot back; the rest are blocked."""
    path = str(tmp_path / "runs")
    results = [tasks.one_at_a_time.enqueue(path, "k", 0) for _ in range(count)]
    selector = QueueSelector(["*"], "default", pause_refresh=0)
    ReadyExecution.objects.claim(selector, 10, registered_process(7))
    return results


def expire_every_slot():
    past = timezone.now() - timedelta(seconds=1)
    Semaphore.objects.update(expires_at=past)
    BlockedExecution.objects.update(expires_at=past)


def test_the_first_poll_expires_abandoned_slots_and_releases_their_waiters(
    make_dispatcher, tmp_path
):
    _, second, third = block_behind_a_dead_holder(tmp_path, 3)
    expire_every_slot()

    make_dispatcher().poll()

    assert ids(ReadyExecution.objects) == job_ids(second)
    assert ids(BlockedExecution.objects) == job_ids(third)
    assert Semaphore.objects.get(key=KEY).expires_at > timezone.now()


def test_concurrency_maintenance_runs_again_only_once_its_interval_passed(
    make_dispatcher, tmp_path
):
    _, second, third = block_behind_a_dead_holder(tmp_path, 3)
    dispatcher = make_dispatcher(concurrency_maintenance_interval=600)
    dispatcher.poll()
    assert ids(ReadyExecution.objects) == set()  # nothing expired yet
    expire_every_slot()

    dispatcher.poll()
    assert ids(BlockedExecution.objects) == job_ids(second, third)

    dispatcher.next_maintenance_at = 0.0  # as if the interval had passed
    dispatcher.poll()
    assert ids(ReadyExecution.objects) == job_ids(second)


def test_a_maintenance_that_failed_is_tried_again_at_the_next_poll(
    make_dispatcher, tmp_path
):
    _, second = block_behind_a_dead_holder(tmp_path, 2)
    expire_every_slot()
    dispatcher = make_dispatcher(concurrency_maintenance_interval=600)

    dispatcher.database = "an-alias-that-is-not-configured"
    ok, _ = dispatcher.guard.call(dispatcher.poll)
    dispatcher.database = "default"
    assert not ok
    assert dispatcher.next_maintenance_at == 0.0

    assert dispatcher.guard.call(dispatcher.poll)[0]
    assert ids(ReadyExecution.objects) == job_ids(second)
    assert dispatcher.next_maintenance_at > 0.0


def run_in_thread(process):
    thread = threading.Thread(target=process.start, daemon=True)
    thread.start()
    return thread


def test_a_started_dispatcher_registers_works_and_deregisters_when_stopped(
    make_dispatcher,
):
    due = scheduled()
    dispatcher = make_dispatcher(batch_size=7)
    thread = run_in_thread(dispatcher)

    row = wait_for(
        lambda: Process.objects.filter(name=dispatcher.name).first(),
        message="the dispatcher registered",
    )
    assert row.kind == "dispatcher"
    assert row.metadata["batch_size"] == 7
    make_due(due)
    wait_for(lambda: ReadyExecution.objects.filter(job_id=due.id).exists())

    dispatcher.stop()
    thread.join(timeout=10)

    assert not thread.is_alive()
    assert not Process.objects.filter(name=dispatcher.name).exists()


def test_a_dispatcher_stopped_before_it_started_never_registers(make_dispatcher):
    due = scheduled()
    make_due(due)
    dispatcher = make_dispatcher()
    dispatcher.stop()

    thread = run_in_thread(dispatcher)
    thread.join(timeout=10)

    assert not thread.is_alive()
    assert dispatcher.process is None
    assert not Process.objects.exists()
    assert ids(ScheduledExecution.objects) == job_ids(due)

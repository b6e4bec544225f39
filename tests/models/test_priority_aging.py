"""Priority aging: a ready job gains one priority per step it waits, up to the
highest priority waiting; once per step whoever ages it, never waiting on a
claim."""

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from steady_queue.backend import SteadyQueueBackend
from steady_queue.conf.options import DispatcherConfig
from steady_queue.models import Job, ReadyExecution
from steady_queue.processes.dispatcher import Dispatcher
from tests.factories import make_job
from tests.helpers import holding_a_transaction, scaled
from tests.lock_waits import beside_a_writer

pytestmark = pytest.mark.django_db(transaction=True)

STEP = 60


def ready_job(priority, waited):
    """A ready job of ``priority`` that became ready ``waited`` seconds ago."""
    job = make_job(priority=priority)
    became_ready = timezone.now() - timedelta(seconds=waited)
    ReadyExecution.objects.filter(job=job).update(created_at=became_ready)
    return job


def priority_of(job):
    return ReadyExecution.objects.priority_of(job.pk)


def age(now=None):
    return ReadyExecution.objects.age_priorities(STEP, now or timezone.now())


def test_a_job_that_waited_a_step_rises_by_one_and_the_top_stays():
    low = ready_job(0, waited=STEP + 5)
    fresh = ready_job(0, waited=5)
    top = ready_job(10, waited=10 * STEP)

    assert age() == 1

    assert (priority_of(low), priority_of(fresh), priority_of(top)) == (1, 0, 10)
    # The job keeps the priority it was enqueued with.
    assert Job.objects.get(pk=low.pk).priority == 0
    # A second call in the same step raises nothing again.
    assert age() == 0
    assert priority_of(low) == 1


def test_a_job_behind_by_several_steps_catches_up_one_raise_each():
    behind = ready_job(0, waited=3 * STEP + 30)
    ready_job(10, waited=0)

    assert age() == 3
    assert priority_of(behind) == 3
    # The next raise is due a step after the third was (30 s from now).
    assert age(timezone.now() + timedelta(seconds=STEP / 2 - 10)) == 0
    assert age(timezone.now() + timedelta(seconds=STEP / 2 + 10)) == 1
    assert priority_of(behind) == 4


def test_no_job_rises_above_the_highest_priority_waiting():
    long_waiting = ready_job(0, waited=100 * STEP)
    ready_job(5, waited=0)

    assert age() == 5
    assert priority_of(long_waiting) == 5
    assert age(timezone.now() + timedelta(hours=10)) == 0


def test_jobs_of_one_priority_are_never_written():
    jobs = [ready_job(3, waited=10 * STEP) for _ in range(3)]

    assert age() == 0
    assert {priority_of(job) for job in jobs} == {3}
    assert set(ReadyExecution.objects.values_list("ages_at", flat=True)) == {None}


def test_aging_runs_within_one_backend_alias():
    other = ready_job(0, waited=5 * STEP)
    ReadyExecution.objects.filter(job=other).update(backend_name="separate")
    ready_job(0, waited=5 * STEP)
    ready_job(9, waited=0)

    raised = ReadyExecution.objects.for_backend("default").age_priorities(
        STEP, timezone.now()
    )

    assert raised == 5
    assert priority_of(other) == 0


@pytest.mark.skipif(
    connection.vendor == "sqlite",
    reason="SQLite has no row locks: a held write locks the whole database",
)
def test_a_row_a_claim_holds_is_skipped_not_waited_for():
    held = ready_job(0, waited=STEP + 5)
    free = ready_job(0, waited=STEP + 5)
    ready_job(10, waited=0)

    # A worker's claim in progress: the row locked, its transaction open.
    release, committed = holding_a_transaction(
        lambda: list(ReadyExecution.objects.filter(job=held).select_for_update()),
        seconds=scaled(30),
    )
    began = time.monotonic()
    try:
        assert age() == 1
    finally:
        took = time.monotonic() - began
        release.set()
    assert committed.wait(scaled(10))
    assert took < scaled(5)
    assert (priority_of(held), priority_of(free)) == (0, 1)
    # Released, it is raised at the next call.
    assert age() == 1
    assert priority_of(held) == 1


@pytest.mark.skipif(
    connection.vendor == "sqlite", reason="SQLite serialises the two callers"
)
def test_two_dispatchers_aging_at_once_raise_each_row_once():
    jobs = [ready_job(0, waited=2 * STEP + 5) for _ in range(300)]
    ready_job(10, waited=0)
    now = timezone.now()
    raised, start = [], threading.Barrier(2)

    def one_dispatcher():
        try:
            start.wait()
            raised.append(
                ReadyExecution.objects.age_priorities(STEP, now, batch_size=20)
            )
        finally:
            connection.close()

    threads = [threading.Thread(target=one_dispatcher) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(scaled(60))

    assert sum(raised) == 2 * len(jobs)
    assert {priority_of(job) for job in jobs} == {2}


def test_the_dispatcher_ages_when_the_option_is_set():
    aging = SteadyQueueBackend("default", {"OPTIONS": {"priority_aging": STEP}})
    plain = SteadyQueueBackend("default", {"OPTIONS": {}})
    low = ready_job(0, waited=STEP + 5)
    ready_job(1, waited=0)

    Dispatcher(plain, DispatcherConfig(), name="dispatcher-plain").poll()
    assert priority_of(low) == 0

    dispatcher = Dispatcher(aging, DispatcherConfig(), name="dispatcher-aging")
    before = time.monotonic()
    dispatcher.poll()
    after = time.monotonic()
    assert priority_of(low) == 1
    # Next due a tenth of a step after the aging, which ran within the poll.
    assert before + STEP / 10 <= dispatcher.next_aging_at <= after + STEP / 10


def test_a_tiny_step_does_not_make_the_dispatcher_spin():
    aging = SteadyQueueBackend("default", {"OPTIONS": {"priority_aging": 0.001}})
    dispatcher = Dispatcher(aging, DispatcherConfig(), name="dispatcher-tiny")

    before = time.monotonic()
    delay = dispatcher.poll()
    after = time.monotonic()
    # The next aging is due 0.1 s after this one, not a tenth of a
    # millisecond; the poll sleeps until then: at least what was left of it
    # when the poll returned (on a loaded machine the poll itself may take
    # the whole 0.1 s, and nothing is left).
    assert dispatcher.next_aging_at >= before + 0.1
    assert delay >= dispatcher.next_aging_at - after


def test_aging_beside_another_writer_waits_for_it_and_raises():
    """On SQLite a transaction that read first fails at once ("database is
    locked") when it comes to write while another writer committed: aging's
    batch takes its rows with a write, so it waits for the writer instead
    (a flood's enqueues kept a dispatcher failing so, bench/scheduling.py)."""
    low = ready_job(0, waited=STEP + 5)
    ready_job(10, waited=0)

    assert beside_a_writer(age) is None

    assert priority_of(low) == 1

"""A worker woken by its doorbell for a job it cannot take wakes another."""

import select

import pytest

from steady_queue import doorbell

from .. import tasks

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not doorbell.is_available(), reason="needs Unix sockets"),
]


@pytest.fixture
def with_doorbells(make_worker):
    """Workers of one thread each, with their doorbells open."""
    made = []

    def make(count):
        for _ in range(count):
            worker = make_worker(threads=1)
            worker.open_doorbell()
            assert worker.doorbell is not None
            made.append(worker)
        return made

    yield make
    for worker in made:
        worker.close_doorbell()


def unrung(*workers):
    """Read the rings waiting (the enqueue's, wherever it went) and forget them."""
    for worker in workers:
        rung(worker)
        worker.doorbell.rung = False


def rung(worker, timeout=0.05):
    readable = select.select([worker.doorbell], [], [], timeout)[0]
    worker.doorbell.drain()
    return bool(readable)


def test_a_worker_with_no_idle_thread_passes_its_ring_on(with_doorbells):
    busy, idle = with_doorbells(2)
    tasks.noop.enqueue()
    busy.poll()  # its one thread now holds the job
    unrung(busy, idle)

    # Rung for a second job, which it has no thread for.
    busy.doorbell.rung = True
    busy.poll()

    assert rung(idle, timeout=5)
    # Passed on once: the worker it reached passes it no further.
    assert not idle.doorbell.rung


def test_a_worker_that_claims_keeps_its_ring(with_doorbells):
    first, second = with_doorbells(2)
    tasks.noop.enqueue()
    unrung(first, second)

    first.doorbell.rung = True
    first.poll()

    assert not rung(second)
    assert not first.doorbell.rung

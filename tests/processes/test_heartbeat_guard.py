"""The heartbeat thread has its own database guard: its beats must not reset the
backoff of the process it keeps alive."""

import pytest
from django.db import connections

from steady_queue.processes.worker import Worker

pytestmark = pytest.mark.django_db(transaction=True)


def broken_query():
    """A statement the database rejects: a real error, from the real server."""
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT * FROM steady_queue_no_such_table")


@pytest.fixture
def worker(backend):
    worker = Worker(backend, backend.config.workers[0], name="worker-guarded")
    assert worker.try_register()
    yield worker
    worker.process.deregister()
    worker.close_wake_pipe()


def test_a_successful_heartbeat_does_not_reset_the_workers_backoff(worker):
    delays = [worker.guard.call(broken_query)[1] for _ in range(2)]

    worker.heartbeat.beat()

    delays.append(worker.guard.call(broken_query)[1])
    assert delays == [0.5, 1.0, 2.0]
    assert worker.guard.failures == 3
    assert worker.heartbeat.guard is not worker.guard

"""Limits under real supervisors whose database connections run their
transactions at REPEATABLE READ or SERIALIZABLE (OPTIONS['isolation_level']),
with the enqueues made at that level too."""

import signal
import threading
import time

import pytest
from django.db import connection, connections

from steady_queue import enqueue_many
from steady_queue.compat import TaskResultStatus
from steady_queue.models import BlockedExecution, Job, Semaphore

from .. import tasks
from ..helpers import at_isolation_level
from .support import (
    intervals,
    most_at_once,
    statuses,
    wait_for_boot,
    wait_for_exit,
    wait_until_settled,
)
from .test_rate_limits import most_in_any_window

pytestmark = [
    pytest.mark.integration,
    pytest.mark.newest_django,
    pytest.mark.django_db(transaction=True),
]


@pytest.fixture(params=["repeatable read", "serializable"])
def level(request):
    """This process's connections (every thread's) run their transactions at
    this level, as the supervisors' do (SQ_TEST_ISOLATION)."""
    if connection.vendor == "sqlite":
        pytest.skip("SQLite has no isolation levels to choose")
    with at_isolation_level(request.param):
        yield request.param


def start_at(start_supervisor, level, **env):
    supervisor = start_supervisor(
        env={"SQ_TEST_ISOLATION": level, "SQ_TEST_THREADS": "5", **env}
    )
    wait_for_boot(supervisor, workers=int(env.get("SQ_TEST_WORKER_PROCESSES", 1)))
    return supervisor


def stop(supervisor):
    supervisor.signal(signal.SIGTERM)
    assert wait_for_exit(supervisor) == 0


def enqueue_from_threads(task, calls, threads=4):
    """Enqueue ``calls`` (args, kwargs) from this many threads at once, as
    web requests would; return the results."""
    results, errors = [], []
    share = [calls[index::threads] for index in range(threads)]

    def run(mine):
        try:
            for args, kwargs in mine:
                results.append(task.enqueue(*args, **kwargs))
        except Exception as error:
            errors.append(error)
        finally:
            connections.close_all()

    workers = [threading.Thread(target=run, args=(mine,)) for mine in share]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert not errors, errors
    return results


def test_a_rate_holds_at_a_stricter_level(start_supervisor, level, tmp_path):
    path = str(tmp_path / "runs")
    supervisor = start_at(start_supervisor, level, SQ_TEST_WORKER_PROCESSES="2")

    # Half enqueued at once (waiting jobs let go by the dispatcher), half
    # from threads while the workers run them.
    results = enqueue_many(tasks.ten_a_second, [((path, "api"), {})] * 20)
    results += enqueue_from_threads(tasks.ten_a_second, [((path, "api"), {})] * 20)
    wait_until_settled(40, timeout=90)

    # Every run stored as it ended: a conflict is retried, never the outcome's.
    assert statuses(results) == {TaskResultStatus.SUCCESSFUL: 40}
    jobs = Job.objects.filter(pk__in=[result.id for result in results])
    starts = [job.started_at.timestamp() for job in jobs]
    # Never more than ten in any second. (That ten are reached is
    # test_rate_limits's to show: a loaded lane can spread the starts.)
    assert most_in_any_window(starts, 1.0) <= 10
    assert not BlockedExecution.objects.exists()
    stop(supervisor)


def test_one_at_a_time_holds_at_a_stricter_level(start_supervisor, level, tmp_path):
    path = str(tmp_path / "runs")
    supervisor = start_at(start_supervisor, level, SQ_TEST_WORKER_PROCESSES="2")

    began = time.monotonic()
    calls = [((path, "k", 0.02), {})] * 40
    # A slot that outlives the test: only a run gives it back, never expiry.
    results = enqueue_from_threads(tasks.one_at_a_time_until_released, calls)
    wait_until_settled(40, timeout=120)
    print(f"40 runs of a key limited to one: {time.monotonic() - began:.2f} s")

    assert statuses(results) == {TaskResultStatus.SUCCESSFUL: 40}
    spans = intervals(path)["k"]
    assert len(spans) == 40
    assert most_at_once(spans) == 1
    # No slot lost or given twice.
    assert list(Semaphore.objects.values_list("value", flat=True)) == [1]
    stop(supervisor)
